"""GRPO for the engineer LLM (policy.llm.engineer_rl): verification rewards move the LoRA
toward the better-rewarded proposal; the adapter is saved and loaded back equal; the learning
engineer wraps the llm engineer. Tiny random-weight model (tests/helpers/tiny_tunix.py), no
download."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

tunix = pytest.importorskip("tunix", reason="the tunix extra is not installed")

pytestmark = pytest.mark.slow

MESSAGES = [{"role": "system", "content": "You design MAPF stages."},
            {"role": "user", "content": "Grid 3x3, 2 agents. Write the plan."}]
GOOD, BAD = '{"a": 1}', "A1: (2,2) -> (2,1)"


@pytest.fixture(scope="module")
def learner(tmp_path_factory):
    from policy.llm.engineer_rl import EngineerLearner
    from tests.helpers.tiny_tunix import tiny_folder

    root = tmp_path_factory.mktemp("rl")
    folder = tiny_folder(root / "rl-tiny", rope_theta=50_000.0, json_text=True, head_scale=1.0)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ENVENGINEER_CACHE", str(root / "cache"))
        return EngineerLearner(folder, rank=4, alpha=8.0, lr=1e-2, steps=1)


def test_advantages():
    from policy.llm.engineer_rl import advantages

    np.testing.assert_allclose(advantages([1.0, 0.0]), [1.0, -1.0], atol=1e-5)
    assert not np.any(advantages([0.2, 0.2, 0.2]))


def _logps(model: Any, tokens: Any, valid: Any) -> Any:
    """log pi of each next token: [B, L-1] (right-padded rows; ``valid`` marks real tokens).
    The plain full pass: the reference the shared-prompt pass is tested against."""
    import jax
    import jax.numpy as jnp

    length = tokens.shape[1]
    positions = jnp.clip(jnp.cumsum(valid, axis=-1) - 1, 0).astype(jnp.int32)
    attn = jnp.tril(jnp.ones((length, length), bool))[None] & valid[:, None, :]
    logits, _ = model(tokens, positions, None, attn)
    lp = jax.nn.log_softmax(logits[:, :-1].astype(jnp.float32), axis=-1)
    return jnp.take_along_axis(lp, tokens[:, 1:, None], axis=-1)[..., 0]


@pytest.mark.parametrize("family", ["llama", "qwen3"])
def test_prompt_runs_once_and_gives_the_full_passes_numbers(family, tmp_path, monkeypatch):
    """The group's replies share one prompt: each layer sees the prompt once (batch 1) and the
    completions per row, and the completion log-probs and the LoRA gradient of a weighted loss
    equal n full passes (the plain reference ``_logps`` above)."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from policy.llm.engineer_rl import EngineerLearner, _completion_logps
    from tests.helpers.tiny_tunix import tiny_folder

    monkeypatch.setenv("ENVENGINEER_CACHE", str(tmp_path / "cache"))
    folder = tiny_folder(tmp_path / family, rope_theta=50_000.0, json_text=True,
                         head_scale=1.0, family=family, tied=family == "qwen3")
    lrn = EngineerLearner(folder, rank=4, alpha=8.0, remat=False)
    for v in nnx.iter_graph(lrn.model):  # a LoRA that is not zero
        if isinstance(v[1], nnx.LoRAParam):
            v[1].set_value(v[1].get_value() + 0.05)
    texts = [GOOD, BAD, GOOD + " and more text here"]
    tokens, valid, cmask, prompt = lrn.batch(MESSAGES, texts)
    assert prompt % 64 == 0 and not valid[:, 0].any() and valid[:, prompt - 1].all()
    weights = jnp.asarray(np.random.default_rng(0).normal(size=cmask.shape), jnp.float32)

    def full(model):
        return _logps(model, tokens, valid)[:, prompt - 1:]  # predicting the completion

    def shared(model):
        return _completion_logps(model, tokens, valid, prompt)

    seen = []
    layer_cls = type(lrn.model.layers[0])
    call = layer_cls.__call__
    monkeypatch.setattr(layer_cls, "__call__",
                        lambda self, x, *a, **k: seen.append(x.shape[:2]) or call(self, x, *a,
                                                                                  **k))
    a = shared(lrn.model)  # Llama: the patched call runs the prompt once; Qwen3 runs as shipped
    once = {(1, prompt), (3, cmask.shape[1])} if family == "llama" else {(3, tokens.shape[1])}
    assert set(seen) == once
    b = full(lrn.model)
    np.testing.assert_allclose(np.asarray(a) * cmask, np.asarray(b) * cmask, atol=2e-5)

    def grads(fn):
        def loss(model):
            return jnp.sum(fn(model) * weights * cmask)
        return nnx.grad(loss, argnums=nnx.DiffState(0, nnx.LoRAParam))(lrn.model)

    g_shared, g_full = jax.tree.leaves(grads(shared)), jax.tree.leaves(grads(full))
    for x, y in zip(g_shared, g_full, strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), atol=1e-5, rtol=1e-3)
    assert max(float(jnp.max(jnp.abs(x))) for x in g_full) > 0
    np.testing.assert_allclose(lrn.logprob(MESSAGES, texts), (np.asarray(b) * cmask).sum(-1),
                               atol=1e-4)


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


def test_learning_engineer_updates_saves_and_reloads(tmp_path):
    """`--learn`: the llm engineer's replies, scored by (here a stand-in) verification,
    train its LoRA; the adapter and the step's record land in the run folder, the backend is
    reloaded from the merged export, and a later engineer starts from the adapter."""
    pytest.importorskip("outlines", reason="the transformers backend needs the llm extra")
    import designer
    from designer.engineer.context import Context, ContextBuilder
    from designer.engineer.edits import preset_space
    from designer.engineer.engineers import LLMEngineer
    from designer.engineer.learning import LearningEngineer, reward_of
    from designer.llm import LoggedBackend
    from designer.llm.calllog import CallLog
    from designer.llm.hf import TransformersBackend
    from designer.run.scoring import Score
    from jaxenv.mapf import Capacity, MAPFFrozenLake
    from policy.llm.engineer_rl import EngineerLearner
    from tests.helpers.tiny_tunix import tiny_folder

    prompts = Path(next(iter(designer.__path__))) / "prompts"
    corpus = tuple((prompts / n).read_text()
                   for n in ("system.md", "single.md", "guidelines.md")) * 3
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ENVENGINEER_CACHE", str(tmp_path / "cache"))
        folder = tiny_folder(tmp_path / "learn-tiny", rope_theta=50_000.0, json_text=True,
                             vocab=1024, corpus=corpus)
        make = lambda: EngineerLearner(folder, rank=4, alpha=8.0, lr=1e-2)  # noqa: E731
        backend = LoggedBackend(TransformersBackend(folder, threads=1, cache=False),
                                CallLog(tmp_path / "calls.jsonl"))
        eng = LLMEngineer(backend, ContextBuilder("T", token_budget=1500), n=3, max_tokens=400,
                          seed=1)
        learning = LearningEngineer(eng, make, tmp_path / "engineer_lora")
        space = preset_space(MAPFFrozenLake(Capacity(max_size=10, max_agents=2)).config_space,
                             "paper")
        successes = iter([0.5, 0.9, 0.99, 0.3, 0.6, 0.7])

        def verify(cands):
            return [Score(success=(p := next(successes)), learnability=p * (1 - p),
                          coverage=1.0, distance=0.0, episodes=8, outcomes={})
                    for _ in cands]

        ctx = Context(stage=1, stages_total=4, env_steps_per_stage=512, env_steps_so_far=1024,
                      current=space.default(), space=space, train={"success_rate": 0.5},
                      verify=verify)
        props = learning.propose(ctx)
        assert props and learning.last_prompt["drafts"]
        rec = learning.last_learn
        usable = [d["error"] is None for d in learning.last_prompt["drafts"]]
        want = [reward_of(Score(s, 0, 0, 0, 0, {}), 0.05, 0.95) if ok else 0.0
                for s, ok in zip([0.5, 0.9, 0.99], usable)]  # one score per usable reply
        assert len(rec["rewards"]) == 3 and sum(usable) >= 2, rec
        if all(usable):
            assert rec["rewards"] == pytest.approx(want)
        assert "skipped" not in rec and rec["step_s"] > 0, rec
        root = tmp_path / "engineer_lora"
        assert (root / "stage-001.safetensors").is_file() and (root / "stage-001.json").is_file()
        assert isinstance(backend.inner, TransformersBackend)
        assert backend.inner.model == "model"  # reloaded from the merged export
        # a later run starts from the saved adapter
        later = LearningEngineer(eng, make, tmp_path / "later",
                                 learn_from=root / "stage-001.safetensors",
                                 reload=lambda folder: None)
        later._start(0)
        a, b = learning.learner.lora_arrays(), later.learner.lora_arrays()
        assert all(np.array_equal(a[k], b[k]) for k in a)
