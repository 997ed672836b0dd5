"""The GRPO LLM trainee in the closed loop (`envengineer run --trainee llm`): the trainee
protocol end to end (run folder, report), a stopped run resumed from its orbax checkpoint, and
the LLM validation scored exactly like `envengineer eval --llm`
(`designer.tasks.mapf.plans.evaluate.evaluate`).

Needs the tunix extra (skipped without it); the model is the tiny random-weight Llama of
tests/helpers/tiny_tunix.py (no download), with 1 GRPO step of 2 samples and 3 validation
instances."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import numpy as np
import pytest

pytest.importorskip("tunix", reason="the tunix extra is not installed")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from tests.helpers.tiny_tunix import tiny_folder

    return tiny_folder(tmp_path_factory.mktemp("tiny") / "m", rope_theta=10_000.0)


def tiny_settings(folder, **kw):
    from designer.settings import RunSettings

    llm = {"model": str(folder), "steps": 1, "group": 2, "instances": 2, "max_new_tokens": 8,
           "max_prompt_tokens": 768, "eval_max_new_tokens": 8, "eval_max_prompt_tokens": 1024,
           "eval_limit": 3, "eval_batch": 4, "verify_levels": 2}
    return RunSettings.model_validate({
        "trainee_kind": "llm", "engineer": "rules", "stages": 2, "candidates": 2, "seed": 3,
        "verify": {"k": 2, "episodes": 8}, "llm": llm, **kw})


def lora(trainee) -> list[np.ndarray]:
    from flax import nnx

    st = trainee.state
    return [np.array(x) for x in jax.tree.leaves(
        nnx.to_pure_dict(nnx.state(trainee.actor(st), nnx.LoRAParam)))]


class Stop(Exception):
    """Stands for a kill after stage 0 (the run folder's lock is released)."""


@pytest.mark.slow
def test_llm_run_stopped_after_stage0_resumes_and_reports(tmp_path, tiny, monkeypatch):
    """Protocol end to end: stage 0 of a `--trainee llm` run with the rules engineer writes
    the run folder; a stop at stage 1 and a resume restore the LoRA parameters saved at stage
    0 (equal), do not redo stage 0, finish the run, and the report builds."""
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    from designer.report import write_report
    from designer.run.loop import ClosedLoop

    s = tiny_settings(tiny)
    assert s.capacity.max_size == 4 and s.capacity.max_agents == 2  # the CPU preset
    out = tmp_path / "run"
    saved: dict[str, list[np.ndarray]] = {}
    loop = ClosedLoop(s, out)

    def stop(stage, phase, what):
        if (stage, phase, what) == (0, "stage", "end"):
            saved["lora"] = lora(loop.trainee)
        if (stage, phase, what) == (1, "train", "start"):
            raise Stop

    loop.on_phase = stop
    with pytest.raises(Stop):
        loop.run()
    d0 = out / "stages" / "000"
    for name in ("config.json", "train.json", "validation.json", "heldout.json",
                 "context.json", "candidates.json", "choice.json", "done.json"):
        assert (d0 / name).is_file(), name
    assert (d0 / "ckpt").is_dir() and not (out / "stages" / "001" / "done.json").exists()
    train = json.loads((d0 / "train.json").read_text())
    assert train["env_steps"] == 2 and 0.0 <= train["success_rate"] <= 1.0
    val = json.loads((d0 / "validation.json").read_text())
    assert val["split"] == "validation" and val["table"]["overall"]["n"] == 3
    cands = json.loads((d0 / "candidates.json").read_text())
    assert cands and all(c["score"]["episodes"] == 2 for c in cands)
    stamp = (d0 / "done.json").stat().st_mtime_ns

    resumed = ClosedLoop(s, out)
    restored: dict[str, list[np.ndarray]] = {}

    def peek(stage, phase, what):
        if (stage, phase, what) == (1, "train", "start"):
            restored["lora"] = lora(resumed.trainee)
            restored["samples"] = resumed.trainee.state.samples

    resumed.on_phase = peek
    results = resumed.run()
    assert [r.stage for r in results] == [0, 1] and results[-1].last
    assert (d0 / "done.json").stat().st_mtime_ns == stamp  # stage 0 was not redone
    assert restored["samples"] == 2 and len(restored["lora"]) == len(saved["lora"]) > 0
    for a, b in zip(saved["lora"], restored["lora"], strict=True):
        np.testing.assert_array_equal(a, b)
    assert json.loads((out / "stages" / "001" / "train.json").read_text())["env_steps"] == 4
    report = write_report([out], out, title="llm trainee").read_text()
    assert "Held-out split" in report


def _plan_texts(meta, pos):
    from jaxenv.mapf.plans.parse import format_plan

    out = []
    for p in pos:
        k = int(meta["agents"][p])
        cells, length = meta["plan_cells"][p], meta["plan_len"][p]
        out.append(format_plan([[tuple(int(x) for x in c) for c in cells[a, :length[a]]]
                                for a in range(k)]))
    return out


@pytest.mark.parametrize("kind", ["optimal", "garbage", "mixed"])
def test_llm_validation_scores_like_plan_eval(tmp_path, kind):
    """The trainee's validation table equals `plan_eval.evaluate`'s on the same replies:
    the stored optimal plans -> 100 % valid and optimal; garbage -> 0 %. (The stored plans are
    SoC-optimal, not always at the optimal makespan: both sides grade sum of costs here.)"""
    from designer.tasks.mapf.plans.answer_log import AnswerLog
    from designer.tasks.mapf.plans.evaluate import evaluate as score
    from designer.tasks.mapf.plans.evaluate import select
    from designer.tasks.mapf.plans.trainee import LLMTrainee
    from jaxenv.mapf.benchmark.validator import load_validator

    v = load_validator("validation", cost="soc")
    pos = select(v.meta, per_cell=1)[:6]
    texts = _plan_texts(v.meta, pos)
    if kind == "garbage":
        texts = ["A0: (0,0) -> (9,9)", "", "no plan", "A0: " + "(1,1) -> " * 400, "{}", "x"]
    elif kind == "mixed":
        texts = [t if i % 2 else "nothing" for i, t in enumerate(texts)]
    levels = jax.tree.map(lambda x: np.asarray(x)[pos], v.levels)
    meta = {k: np.asarray(m)[pos] for k, m in v.meta.items() if np.ndim(m)}
    val = LLMTrainee.evaluate_replies(v, levels, meta, texts)
    log = AnswerLog(tmp_path / "a.jsonl")
    log.start({"split": "validation", "mode": "text", "max_tokens": 8})
    for p, t in zip(pos, texts, strict=True):
        log.append({"kind": "answer", "id": int(v.meta["index"][p]), "text": t,
                    "agents": int(v.meta["agents"][p]), "size": int(v.meta["size"][p])})
    ref = score(AnswerLog(tmp_path / "a.jsonl"), cost="soc")
    order = np.argsort(np.asarray(v.meta["index"])[pos])  # score() sorts by instance id
    np.testing.assert_array_equal(val.result.valid[order], ref.valid)
    np.testing.assert_array_equal(val.result.optimal[order], ref.optimal)
    assert val.table.to_dict() == ref.table.to_dict()
    want = {"optimal": 100.0, "garbage": 0.0, "mixed": 50.0}[kind]
    assert val.table.overall.valid == want and val.table.overall.optimal == want
    from jaxenv.mapf.rules import CAUSES

    assert ((val.result.outcome == 0) == val.result.valid).all()
    # unparsable -> the plan never got everyone home
    assert (val.result.outcome[~ref.parsed[np.argsort(order)]] == CAUSES.index("timeout")).all()
    from designer.tasks.mapf.failures import mapf_failures

    assert mapf_failures(val, {"success_rate": 0.0}).summary()  # F reads it


@pytest.mark.slow
def test_export_hf_calls_the_export_module(tmp_path, tiny):
    """`export_hf` hands the current model to `policy.llm.export.export_hf` (skipped until
    that module exists)."""
    pytest.importorskip("policy.llm.export", reason="policy.llm.export is not here yet")
    from designer.tasks.mapf.plans.trainee import LLMTrainee
    from jaxenv.mapf.config import Capacity

    t = LLMTrainee(tiny_settings(tiny).llm, Capacity(max_size=4, max_agents=2))
    t.init(jax.random.PRNGKey(0))
    out = t.export_hf(tmp_path / "hf")
    assert (out / "config.json").is_file() and list(out.glob("*.safetensors"))


@pytest.mark.slow
def test_self_engineer_in_the_loop(tmp_path, monkeypatch):
    """`run --trainee llm --engineer self` end to end: after stage 0 the trainee's own
    checkpoint (LoRA merged, exported) is the engineer; its proposals are grammar-bound edits
    of the paper's knobs, verified by the trainee's sampled plans, logged; the run finishes."""
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    monkeypatch.setenv("ENVENGINEER_CACHE", str(tmp_path / "cache"))
    pytest.importorskip("outlines", reason="the self engineer's backend needs the llm extra")
    import designer
    from designer.run.loop import ClosedLoop
    from tests.helpers.tiny_tunix import tiny_folder

    prompts = sorted((Path(designer.__file__).parent / "prompts").glob("*.md"))
    folder = tiny_folder(tmp_path / "self-tiny", rope_theta=10_000.0, tied=True, json_text=True,
                         vocab=1024, corpus=tuple(p.read_text() for p in prompts) * 3)
    s = tiny_settings(folder, engineer="self", max_tokens=300, token_budget=1500)
    loop = ClosedLoop(s, tmp_path / "run")
    results = loop.run()
    assert [r.stage for r in results] == [0, 1]
    export = tmp_path / "run" / "self_engineer" / "model"
    assert (export / "config.json").is_file()
    cands = json.loads((tmp_path / "run" / "stages" / "000" / "candidates.json").read_text())
    assert cands and all(c["score"]["episodes"] == 2 for c in cands)
    space = loop.space
    for c in cands:
        assert space.validate(c["values"]) == c["values"]  # a valid config of the space
    calls = [json.loads(x) for x in (tmp_path / "run" / "calls.jsonl").read_text().splitlines()]
    assert calls, "the self engineer's calls are logged"
