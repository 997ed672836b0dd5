"""GRPO for the engineer LLM (policy.llm.engineer_rl): verification rewards move the LoRA
toward the better-rewarded proposal; the adapter is saved and loaded back equal; the learning
engineer wraps the llm engineer. Tiny random-weight model (tests/tiny_tunix.py), no download."""

from __future__ import annotations

import numpy as np
import pytest

tunix = pytest.importorskip("tunix", reason="the tunix extra is not installed")

MESSAGES = [{"role": "system", "content": "You design MAPF stages."},
            {"role": "user", "content": "Grid 3x3, 2 agents. Write the plan."}]
GOOD, BAD = '{"a": 1}', "A1: (2,2) -> (2,1)"


@pytest.fixture(scope="module")
def learner(tmp_path_factory):
    from policy.llm.engineer_rl import EngineerLearner
    from tests.tiny_tunix import tiny_folder

    root = tmp_path_factory.mktemp("rl")
    folder = tiny_folder(root / "rl-tiny", rope_theta=50_000.0, json_text=True, head_scale=1.0)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ENVENGINEER_CACHE", str(root / "cache"))
        return EngineerLearner(folder, rank=4, alpha=8.0, lr=1e-2, steps=1)


def test_advantages():
    from policy.llm.engineer_rl import advantages

    np.testing.assert_allclose(advantages([1.0, 0.0]), [1.0, -1.0], atol=1e-5)
    assert not np.any(advantages([0.2, 0.2, 0.2]))


def test_two_learn_steps_raise_the_better_proposal(learner, tmp_path):
    before = learner.lora_arrays()
    lp0 = learner.logprob(MESSAGES, [GOOD, BAD])
    out = None
    for rewards in ([0.25, 0.0], [0.2, 0.05]):  # two stages' verification scores
        out = learner.step(MESSAGES, [GOOD, BAD], rewards)
    assert "skipped" not in out and len(out["losses"]) == 1
    after = learner.lora_arrays()
    assert any(not np.array_equal(before[k], after[k]) for k in before)
    lp1 = learner.logprob(MESSAGES, [GOOD, BAD])
    assert lp1[0] > lp0[0] and (lp1[0] - lp1[1]) > (lp0[0] - lp0[1]), (lp0, lp1)
    skipped = learner.step(MESSAGES, [GOOD, BAD], [0.0, 0.0])  # no signal: no update
    assert "skipped" in skipped
    np.testing.assert_allclose(learner.logprob(MESSAGES, [GOOD, BAD]), lp1, rtol=1e-5)


def test_adapter_saved_and_loaded_back_equal(learner, tmp_path):
    from flax import nnx

    from policy.llm.engineer_rl import EngineerLearner

    learner.step(MESSAGES, [GOOD, BAD], [1.0, 0.0])
    path = learner.save_adapter(tmp_path / "adapter.safetensors")
    saved = learner.lora_arrays()
    fresh = EngineerLearner(loaded=(learner.base, learner.tokenizer, learner.folder), rank=4,
                            alpha=8.0)
    assert any(not np.array_equal(saved[k], v) for k, v in fresh.lora_arrays().items())
    meta = fresh.load_adapter(path)
    assert meta["rank"] == "4"
    got = fresh.lora_arrays()
    assert set(got) == set(saved) and all(np.array_equal(got[k], saved[k]) for k in saved)
    np.testing.assert_allclose(fresh.logprob(MESSAGES, [GOOD]), learner.logprob(MESSAGES,
                               [GOOD]), rtol=1e-5)
    with pytest.raises(ValueError, match="rank"):
        EngineerLearner(loaded=(learner.base, learner.tokenizer, learner.folder), rank=2,
                        alpha=8.0).load_adapter(path)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp")]
    del nnx
