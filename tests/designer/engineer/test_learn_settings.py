"""`--learn` and `--engineer self` settings and errors (no model, no tunix needed)."""

from __future__ import annotations

import pytest

from designer.cli import build_settings, parser
from designer.engineer.registry import make_engineer
from designer.settings import RunSettings


class Stub:
    name, model, constrained = "stub", "stub", True

    def generate(self, *a, **k):
        raise AssertionError("not called")

    def count_tokens(self, messages):
        return 1


class Trainee:
    def export_hf(self, folder):
        raise AssertionError("not called")


def test_learn_flags():
    args = parser().parse_args(["run", "--learn", "--learn-from", "a.safetensors",
                                "--learn-lr", "0.001"])
    s = build_settings(args)
    assert s.learn.enabled and s.learn.source == "a.safetensors" and s.learn.lr == 0.001
    assert not build_settings(parser().parse_args(["run"])).learn.enabled


def test_learn_needs_the_transformers_backend_and_not_self():
    with pytest.raises(ValueError, match="--learn needs --backend transformers"):
        make_engineer(RunSettings(backend="openai", learn={"enabled": True}), backend=Stub())
    with pytest.raises(ValueError, match="not supported yet"):
        make_engineer(RunSettings(engineer="self", learn={"enabled": True}), trainee=Trainee())
    with pytest.raises(ValueError, match="the self engineer needs --trainee llm"):
        make_engineer(RunSettings(engineer="self"))


def test_learning_engineer_wraps_the_llm_engineer(tmp_path):
    from designer.engineer.learning import LearningEngineer
    from designer.run.folder import RunFolder

    eng = make_engineer(RunSettings(learn={"enabled": True}), RunFolder(tmp_path / "run"),
                        backend=Stub())
    assert isinstance(eng, LearningEngineer) and eng.name == "llm" and eng.verified
    assert eng.root == tmp_path / "run" / "engineer_lora"
    assert callable(eng._learner) and not hasattr(eng._learner, "step")  # loaded lazily
    eng.last_prompt = None
    assert eng.engineer.last_prompt is None


def test_adapter_flag(tmp_path, capsys):
    """`--adapter`: auto by default (the shipped adapter for the embedded engineer, none for
    any other, resolved so that run.json names it); a file, a shipped name or `shipped`;
    anything else, or an adapter for an engineer that is not the transformers `llm`, refused
    with a reason. The backend a run opens says where its adapter came from."""
    from designer.engineer import adapters
    from designer.llm.open import open_backend

    def default(*flags: str) -> str:
        return build_settings(parser().parse_args(["run", *flags])).adapter

    assert adapters.SHIPPED in adapters.shipped()
    assert default() == default("--adapter", "auto") == adapters.SHIPPED
    assert default("--adapter", "none") == "none"
    for flags in (["--engineer", "rules"], ["--backend", "openai"], ["--model", str(tmp_path)],
                  ["--learn"]):
        assert default(*flags) == "none", flags
    from designer.cli import compare  # each engineer of a compare: the adapter is llm's

    args = parser().parse_args(["compare", "--engineers", "fixed,llm", "--seeds", "0",
                                "--out", str(tmp_path / "c")])
    assert [(s.engineer, s.adapter) for s, _ in compare.planned(args)[0]] == \
        [("fixed", "none"), ("llm", adapters.SHIPPED)]
    with pytest.MonkeyPatch.context() as mp:  # a package without the file: the base model
        mp.setattr(adapters, "shipped", lambda: [])
        assert default() == "none"
    path = tmp_path / "mine.safetensors"
    path.write_bytes(b"x")
    s = build_settings(parser().parse_args(["run", "--adapter", str(path)]))
    assert s.adapter == str(path)
    backend = open_backend(s, None)  # lazy: nothing loaded yet
    assert backend.inner._options["adapter"] == str(path)
    assert f"engineer adapter: file: {path}" in capsys.readouterr().err
    with pytest.raises(ValueError, match="no adapter"):
        RunSettings(adapter=str(tmp_path / "missing.safetensors"))
    with pytest.raises(ValueError, match="no adapter") as err:  # too long for the filesystem
        RunSettings(adapter="x" * 1_000_000)
    assert len(str(err.value)) < 2_000 and "(1000000 characters)" in str(err.value)
    with pytest.raises(ValueError, match="--adapter needs --engineer llm"):
        RunSettings(adapter=str(path), backend="openai")
    with pytest.raises(ValueError, match="--learn-from"):
        RunSettings(adapter=str(path), learn={"enabled": True})
