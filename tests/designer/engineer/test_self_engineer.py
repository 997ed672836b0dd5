"""The `self` engineer: the trainee's checkpoint (tunix, LoRA) exported and loaded into the
transformers/outlines backend proposes the next config, grammar-constrained, verified and
logged like the `llm` engineer's; an export only per new checkpoint; a clear error without an
LLM trainee. Tiny random-weight model (tests/helpers/tiny_tunix.py), no download."""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np
import pytest

tunix = pytest.importorskip("tunix", reason="the tunix extra is not installed")
pytest.importorskip("outlines", reason="the transformers backend needs the llm extra")

from designer.engineer.context import Context, ContextBuilder  # noqa: E402
from designer.engineer.engineers import SelfEngineer  # noqa: E402
from designer.engineer.registry import make_engineer  # noqa: E402
from designer.llm.calllog import CallLog  # noqa: E402
from designer.settings import RunSettings  # noqa: E402

pytestmark = pytest.mark.slow


class FakeTrainee:
    """What the self engineer needs of an LLM trainee: `export_hf(folder) -> Path` (here the
    tiny tunix model with a random LoRA, through `policy.llm.export`) and its tokenizer."""

    def __init__(self, folder: Path):
        from flax import nnx

        from policy.llm import tunix_adapter as A

        self.source = folder
        base, self.tokenizer, _ = A.load_model(folder)
        self.model = A.apply_lora(base, A.make_mesh(), rank=4, alpha=8.0)
        rng = np.random.default_rng(0)
        for path, v in nnx.iter_graph(self.model):
            if isinstance(v, nnx.LoRAParam) and str(path[-1]).endswith("_lora_b"):
                v.set_value(rng.normal(0, 0.1, v.shape).astype(v.dtype))
        self.exports = 0

    def export_hf(self, folder):
        from policy.llm.export import export_hf

        self.exports += 1
        return export_hf(self.model, self.tokenizer, self.source, folder)


@pytest.fixture(scope="module")
def trainee(tmp_path_factory):
    import designer
    from tests.helpers.tiny_tunix import tiny_folder

    prompts = Path(designer.__file__).parent / "prompts"  # shorter prompts in tokens
    corpus = tuple(p.read_text() for p in sorted(prompts.glob("*.md")))
    root = tmp_path_factory.mktemp("tiny")
    folder = tiny_folder(root / "self-tiny", rope_theta=50_000.0, tied=True, json_text=True,
                         vocab=1024, corpus=corpus * 3)
    with pytest.MonkeyPatch.context() as mp:  # tied_folder's cache is keyed by folder name
        mp.setenv("ENVENGINEER_CACHE", str(root / "cache"))
        return FakeTrainee(folder)


@pytest.fixture(scope="module")
def world():
    """A context of a briefly trained PPO trainee (MAPF), and what verification needs."""
    from designer.tasks.mapf.failures import mapf_failures
    from tests.helpers.trained_mapf import trained_mapf

    t = trained_mapf()
    ctx = Context(stage=2, stages_total=6, env_steps_per_stage=512, env_steps_so_far=1536,
                  current=t.space.default(), space=t.space,
                  failures=mapf_failures(t.val, t.train), train=t.train)
    return {"env": t.env, "space": t.space, "net": t.net, "params": t.params, "ctx": ctx}


def _engineer(trainee, tmp_path, log):
    eng = SelfEngineer(trainee, None, export_dir=tmp_path / "self" / "model", log=log, n=3,
                       max_tokens=400, seed=5, backend_options={"threads": 1})
    eng.builder = ContextBuilder("T", token_budget=1500, count_tokens=eng.backend.count_tokens)
    return eng


def test_self_engineer_proposes_constrained_verified_logged(trainee, world, tmp_path):
    from designer.engineer.engineers import LLMEngineer
    from designer.llm.replay import ReplayBackend
    from designer.run.scoring import CandidateScorer

    ctx, space = world["ctx"], world["space"]
    log = CallLog(tmp_path / "calls.jsonl")
    eng = _engineer(trainee, tmp_path, log)
    props = eng.propose(ctx)
    assert props and all(p.source.startswith("llm:self/") for p in props), props
    assert eng.source.exports == 1 and (tmp_path / "self" / "model" / "config.json").is_file()
    for p in props:
        space.validate(p.values)
        assert p.log_ids
    (call,) = log.calls()
    assert call["constrained"] and call["backend"] == "self"
    for r in call["replies"]:  # the grammar bound every reply: each parses strictly
        assert r["edit"] is not None and r["error"] is None, r
    # verified and chosen like any engineer's candidates
    ver = CandidateScorer(world["env"], world["net"], k=4, episodes=16, space=space)
    scores = ver.score(world["params"], [p.values for p in props], ctx.current,
                       jax.random.PRNGKey(3))
    assert len(scores) == len(props)
    assert ver.choose(scores).reason
    # replayable without the model
    builder = ContextBuilder("T", token_budget=1500, count_tokens=eng.backend.count_tokens)
    again = LLMEngineer(ReplayBackend(tmp_path / "calls.jsonl"), builder, n=3, max_tokens=400,
                        seed=5).propose(ctx)
    assert [p.values for p in again] == [p.values for p in props]


def test_export_only_on_a_new_checkpoint(trainee, world, tmp_path):
    import dataclasses

    eng = _engineer(trainee, tmp_path, CallLog(None))
    msgs = [{"role": "user", "content": "Propose."}]
    schema = {"type": "object", "properties": {"x": {"enum": ["a", "b"]}}, "required": ["x"]}
    eng.source.use("stage-7")
    eng.source.generate(msgs, schema, n=1, max_tokens=12)
    eng.source.generate(msgs + [{"role": "user", "content": "Again."}], schema, n=1,
                        max_tokens=12)
    assert eng.source.exports == 1  # the same checkpoint: exported and loaded once
    before = trainee.exports
    eng.propose(dataclasses.replace(world["ctx"], stage=8))
    assert eng.source.exports == 2 and trainee.exports == before + 1


def test_self_needs_an_llm_trainee(tmp_path, trainee):
    s = RunSettings(engineer="self")
    with pytest.raises(ValueError, match="the self engineer needs --trainee llm"):
        make_engineer(s)
    with pytest.raises(ValueError, match="the self engineer needs --trainee llm"):
        make_engineer(s, trainee=object())
    from designer.run.folder import RunFolder

    eng = make_engineer(s, RunFolder(tmp_path / "run"), trainee=trainee)
    assert isinstance(eng, SelfEngineer) and eng.name == "self"
    assert eng.backend.log.path == tmp_path / "run" / "calls.jsonl"
    assert eng.source.export_dir == tmp_path / "run" / "self_engineer" / "model"


def test_an_adapter_is_merged_over_each_checkpoint(trainee, world, tmp_path):
    """`--adapter` with the self engineer: the engineer's LoRA (here a random one for the tiny
    model) is merged over every exported checkpoint, so the model that answers is the
    checkpoint plus the adapter, remade when the checkpoint changes; the settings accept it."""
    import dataclasses

    from flax import nnx
    from safetensors.numpy import load_file

    from designer.run.folder import RunFolder
    from policy.llm.engineer_rl import EngineerLearner

    lrn = EngineerLearner(trainee.source, rank=4, alpha=8.0, remat=False)
    rng = np.random.default_rng(1)
    for path, v in nnx.iter_graph(lrn.model):
        if isinstance(v, nnx.LoRAParam) and str(path[-1]).endswith("_lora_b"):
            v.set_value(rng.normal(0, 0.1, v.shape).astype(v.dtype))
    adapter = lrn.save_adapter(tmp_path / "adapter.safetensors")

    s = RunSettings(engineer="self", adapter=str(adapter))
    assert s.adapter == str(adapter)
    eng = make_engineer(s, RunFolder(tmp_path / "run"), trainee=trainee)
    assert eng.source.adapter == adapter
    eng.builder = ContextBuilder("T", token_budget=1500, count_tokens=eng.backend.count_tokens)
    props = eng.propose(world["ctx"])
    assert props and all(p.source.startswith("llm:self/") for p in props), props
    root = tmp_path / "run" / "self_engineer"
    plain = load_file(str(root / "model" / "model.safetensors"))
    merged = load_file(str(root / "model+adapter" / "model.safetensors"))
    assert plain.keys() == merged.keys()
    changed = [k for k in plain if not np.array_equal(plain[k], merged[k])]
    assert changed and all("proj" in k for k in changed), changed  # the LoRA's targets only
    loaded = {n: p.detach().numpy() for n, p in eng.source.backend().lm.named_parameters()}
    k = changed[0]
    np.testing.assert_array_equal(loaded[k], merged[k])  # the answering model is the merge
    stamp = (root / "model+adapter" / "model.safetensors").stat().st_mtime_ns
    eng.propose(dataclasses.replace(world["ctx"], stage=3))  # a new checkpoint: merged anew
    assert eng.source.exports == 2
    assert (root / "model+adapter" / "model.safetensors").stat().st_mtime_ns != stamp
    with pytest.raises(ValueError, match="--adapter needs"):
        RunSettings(engineer="dr", adapter=str(adapter))
