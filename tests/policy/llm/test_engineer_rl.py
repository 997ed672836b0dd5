"""GRPO for the engineer LLM (policy.llm.engineer_rl): verification rewards move the LoRA
toward the better-rewarded proposal; the adapter is saved and loaded back equal; the learning
engineer wraps the llm engineer. Tiny random-weight model (tests/helpers/tiny_tunix.py), no
download."""

from __future__ import annotations

import json
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
    # Jitted (one compile each, not an eager dispatch per op); tracing calls the layers.
    # Llama: the patched call runs the prompt once; Qwen3 runs as shipped.
    a = nnx.jit(shared)(lrn.model)
    once = {(1, prompt), (3, cmask.shape[1])} if family == "llama" else {(3, tokens.shape[1])}
    assert set(seen) == once
    b = nnx.jit(full)(lrn.model)
    np.testing.assert_allclose(np.asarray(a) * cmask, np.asarray(b) * cmask, atol=2e-5)

    def grads(fn):
        def loss(model):
            return jnp.sum(fn(model) * weights * cmask)
        return nnx.jit(nnx.grad(loss, argnums=nnx.DiffState(0, nnx.LoRAParam)))(lrn.model)

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


def test_training_continues_from_a_loaded_adapter(learner, tmp_path):
    """`load_adapter(start=True)`: `reset` returns to the loaded adapter (training continued
    from it, `scripts/train_engineer.py --init`); a plain load is undone by `reset`."""
    from policy.llm.engineer_rl import EngineerLearner

    learner.step(MESSAGES, [GOOD, BAD], [1.0, 0.0])
    path = learner.save_adapter(tmp_path / "adapter.safetensors")
    saved = learner.lora_arrays()
    fresh = EngineerLearner(loaded=(learner.base, learner.tokenizer, learner.folder), rank=4,
                            alpha=8.0)
    own = fresh.lora_arrays()
    fresh.load_adapter(path)
    fresh.reset()
    assert all(np.array_equal(fresh.lora_arrays()[k], own[k]) for k in own)
    fresh.load_adapter(path, start=True)
    fresh.step(MESSAGES, [GOOD, BAD], [0.0, 1.0])
    assert any(not np.array_equal(fresh.lora_arrays()[k], saved[k]) for k in saved)
    fresh.reset()
    got = fresh.lora_arrays()
    assert all(np.array_equal(got[k], saved[k]) for k in saved)


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


# ---------------------------------------------------------------- training on move tables


def _script() -> Any:
    """scripts/train_engineer.py as a module (scripts/ is not a package)."""
    import importlib.util
    import sys

    path = Path(__file__).resolve().parents[3] / "scripts" / "train_engineer.py"
    spec = importlib.util.spec_from_file_location("train_engineer", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def _space() -> Any:
    from designer.engineer.edits import preset_space
    from jaxenv.mapf import Capacity, MAPFFrozenLake

    return preset_space(MAPFFrozenLake(Capacity(max_size=10, max_agents=2)).config_space, "paper")


def toy_rows(seeds: list[int], n_moves: int = 6, label: int | None = None
             ) -> list[dict[str, Any]]:
    """Rows in the dataset's shape: context i labels move ``label`` best (default: i mod
    n_moves, a different move per context)."""
    from designer.engineer.moves import TRAINING, admitted

    space = _space()
    moves = admitted(space, space.default())[::7][:n_moves]
    rows = []
    for i, seed in enumerate(seeds):
        scores = np.linspace(0.1, 0.3, n_moves)
        best = i % n_moves if label is None else label
        scores[best] = 0.9
        rows.append({"key": ["mapf", seed, "dr", 1], "seed": seed,
                     "messages": [{"role": "system", "content": "You design MAPF stages."},
                                  {"role": "user", "content": f"Grid {i + 3}x{i + 3}, "
                                   f"{i % 2 + 1} agents. Write the plan."}],
                     "diagnosis": {"training": TRAINING[i % 3], "weakest": "none"},
                     "moves": [{"move": m, "score": {"success": 0.5}, "choice_score": float(s)}
                               for m, s in zip(moves, scores)]})
    return rows


def test_reading_and_splitting_the_dataset():
    s = _script()
    rows = toy_rows([10, 11, 40])
    rows[1]["moves"][3]["realized"] = {"score": 0.6, "gain": 0.05}  # measured: it decides
    rows[1]["moves"][1]["realized"] = {"score": 0.5, "gain": -0.05}
    rows[1]["moves"][2]["choice_score"] = None  # outside the rule's band: 0
    flat = dict(rows[2], moves=[{"move": m["move"], "score": 0.2} for m in rows[2]["moves"]])
    ex = s.read_rows([*rows, flat])  # equal scores teach nothing: skipped
    assert [e.seed for e in ex] == [10, 11, 40]
    assert ex[0].best == 0 and not ex[0].realized and ex[1].best == 3 and ex[1].realized
    assert ex[1].scores[2] == 0.0 and ex[0].key == "mapf/10/dr/1"
    train, held = s.split(ex, s.seed_set("10-11"), s.seed_set("40"))
    assert [e.seed for e in train] == [10, 11] and [e.seed for e in held] == [40]
    with pytest.raises(ValueError, match="both"):
        s.split(ex, {10, 40}, {40})
    from policy.llm.engineer_rl import MEMORY_FLAG

    assert s.MEMORY_FLAG == MEMORY_FLAG  # the script sets it before JAX starts
    target = s.sft_target(ex[0])
    assert target.startswith(s.prefix(ex[0].diagnosis) + ex[0].moves[0] + '"]')
    from designer.engineer.moves import apply_moves

    out = apply_moves(_space(), target, _space().default(), None, constrained=True)
    assert out.ok and out.moves == [ex[0].moves[0]], out.rejection


def test_a_file_that_is_not_a_dataset_is_named_in_one_line(tmp_path):
    """Where the data cannot be read, `load` says which file, line or row and what is missing
    (the script prints it as one line) instead of a KeyError or TypeError from deep inside."""
    s = _script()
    row = toy_rows([10])[0]
    cases = {"absent.jsonl": None, "torn.jsonl": "{\"seed\": 1\n",
             "list.jsonl": "[1, 2]\n", "nodiag.jsonl": {k: v for k, v in row.items()
                                                      if k != "diagnosis"},
             "badmove.jsonl": dict(row, moves=[{"move": "x", "score": {"success": 0.5}}]),
             "badgain.jsonl": dict(row, moves=[dict(row["moves"][0], realized={"g": 1})])}
    said = {}
    for name, content in cases.items():
        if content is not None:
            (tmp_path / name).write_text(content if isinstance(content, str)
                                         else json.dumps(content) + "\n")
        with pytest.raises(ValueError) as e:
            s.load([tmp_path / name])
        said[name] = str(e.value)
    assert "absent.jsonl: cannot be read" in said["absent.jsonl"]
    assert "torn.jsonl line 1: not JSON" in said["torn.jsonl"]
    assert said["list.jsonl"].endswith("row 0: not a JSON object")
    assert "missing diagnosis, diagnosis.training" in said["nodiag.jsonl"]
    assert "missing a move's" in said["badmove.jsonl"] and "missing a move's" in \
        said["badgain.jsonl"]
    assert all("\n" not in m and str(tmp_path) in m for m in said.values())
    assert s.seed_set("10-12,15") == {10, 11, 12, 15}
    with pytest.raises(SystemExit, match="^--heldout-seeds: '5-y' is not a seed or a range"):
        s.seed_set("50,5-y", "--heldout-seeds")


@pytest.fixture(scope="module")
def move_learner(tmp_path_factory):
    """A tiny model whose BPE holds the toy replies' words (a move is a few tokens) and whose
    output layer is sharp enough for a LoRA of rank 4 to move its choice in a few steps; a
    learning rate low enough that where SFT ends does not hang on how the compiler rounds (at
    a higher one the loss jumps, and the result moved with XLA's optimisation level)."""
    from policy.llm.engineer_rl import EngineerLearner
    from tests.helpers.tiny_tunix import tiny_folder

    s = _script()
    ex = s.read_rows(toy_rows([10, 11, 12, 13]))
    corpus = tuple(s.reply_text(e.diagnosis, [m], s.rationale(e.diagnosis))
                   for e in ex for m in e.moves) * 3
    root = tmp_path_factory.mktemp("moves")
    folder = tiny_folder(root / "tiny", rope_theta=50_000.0, json_text=True, vocab=1024,
                         corpus=corpus, head_scale=30.0)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ENVENGINEER_CACHE", str(root / "cache"))
        return EngineerLearner(folder, rank=4, alpha=8.0, lr=2e-2)


@pytest.fixture(scope="module")
def trained(move_learner, tmp_path_factory):
    """The move learner after SFT on toy contexts that all label one move best (not the
    model's first choice): the label's log-probability margin to the model's top choice
    before and after, and the adapter saved."""
    s = _script()
    ex = s.read_rows(toy_rows([10, 11, 12, 13], label=2))
    move_learner.reset()
    model = s.MoveModel(move_learner, chunk=8)

    def margins() -> np.ndarray:  # label's log pi minus the best other move's, per context
        out = []
        for e in ex:
            lp = model.logprobs(e)
            out.append(lp[e.best] - np.delete(lp, e.best).max())
        return np.asarray(out)

    before = (s.evaluate(model, ex), margins())
    losses = [s.sft_step(model, ex) for _ in range(20)]
    after = (s.evaluate(model, ex), margins())
    path = move_learner.save_adapter(tmp_path_factory.mktemp("sft") / "adapter.safetensors")
    return s, model, ex, (before, after), losses, path


def test_sft_moves_the_top1_choice_toward_the_labels(trained):
    """The label starts far below the model's first choice (a tiny random model prefers the
    move of fewest tokens); SFT on the label's reply makes it the first choice in every
    context, and the distribution's mean score does not fall."""
    s, model, ex, ((ev0, m0), (ev1, m1)), losses, _ = trained
    assert losses[-1] < 0.7 * losses[0]
    assert np.all(m0 < 0) and ev0["top1"] == 0.0  # the label is not the first choice
    assert np.all(m1 > 0) and ev1["top1"] == 1.0, (m0, m1)
    assert ev1["score_expected"] >= ev0["score_expected"]


def test_packed_contexts_score_as_each_alone(trained):
    """Contexts of different prompt lengths packed in one batch give each its own numbers."""
    s, model, ex, *_ = trained
    lrn = model.learner
    groups = [model.ids(e) for e in ex[:2]]
    groups = [(p, m[:4]) for p, m in groups]
    packed = lrn.group_logprobs(groups, bucket=s.MOVE_BUCKET)
    for g, row in zip(groups, packed):
        np.testing.assert_allclose(row, lrn.group_logprobs([g], bucket=s.MOVE_BUCKET)[0],
                                   atol=1e-4)


def test_adapter_round_trip_gives_the_same_scores(trained):
    from policy.llm.engineer_rl import EngineerLearner

    s, model, ex, _, _, path = trained
    lrn = model.learner
    fresh = EngineerLearner(loaded=(lrn.base, lrn.tokenizer, lrn.folder), rank=4, alpha=8.0)
    other = s.MoveModel(fresh, chunk=8)
    assert not np.allclose(other.logprobs(ex[0]), model.logprobs(ex[0]), atol=1e-3)
    fresh.load_adapter(path)
    for e in ex:
        np.testing.assert_allclose(other.logprobs(e), model.logprobs(e), atol=1e-4)


def test_a_shipped_adapter_is_half_the_bytes_and_scores_as_trained(trained, tmp_path):
    """`--ship` writes the adapter in float16 with the base model named, not pathed; a learner
    loads it and scores every move as the float32 adapter does, to float16's rounding."""
    from safetensors.numpy import load_file

    from policy.llm.engineer_rl import EngineerLearner, adapter_meta

    s, model, ex, _, _, path = trained
    shipped = s.ship(path, tmp_path / "toy" / "adapter.safetensors", "tiny-llama")
    full, half = load_file(str(path)), load_file(str(shipped))
    assert set(full) == set(half) and all(v.dtype == np.float16 for v in half.values())
    assert 2 * sum(v.nbytes for v in half.values()) == sum(v.nbytes for v in full.values())
    meta = adapter_meta(shipped)
    assert meta["base"] == "tiny-llama" and meta["dtype"] == "float16"
    trained_meta = adapter_meta(path)
    assert (meta["rank"], meta["alpha"]) == (trained_meta["rank"], trained_meta["alpha"])
    lrn = model.learner
    fresh = EngineerLearner(loaded=(lrn.base, lrn.tokenizer, lrn.folder), rank=4, alpha=8.0)
    fresh.load_adapter(shipped)
    other = s.MoveModel(fresh, chunk=8)
    # A reply's log-probability sums some 60 tokens' terms, each moved by the weights' float16
    # rounding (relative 2**-11): relative agreement, 4 such roundings; the choice is the same.
    for e in ex:
        np.testing.assert_allclose(other.logprobs(e), model.logprobs(e), rtol=4 * 2.0**-11)
        assert np.argmax(other.logprobs(e)) == np.argmax(model.logprobs(e))


def test_grpo_over_many_contexts_raises_the_mean_score(move_learner):
    """Moves sampled (hot: the tiny model's distribution is peaked) from four contexts per
    update, rewarded by their scores: the best move gains on the others, the mean score
    under the model does not fall."""
    s = _script()
    ex = s.read_rows(toy_rows([10, 11, 12, 13], label=2))
    move_learner.reset()
    model = s.MoveModel(move_learner, chunk=8)
    rng = np.random.default_rng(0)

    def margin() -> float:  # the labelled best move's log pi over the others' mean
        return float(np.mean([(lp := model.logprobs(e))[e.best] - np.delete(lp, e.best).mean()
                              for e in ex]))

    before, m0 = s.evaluate(model, ex)["score_expected"], margin()
    recs = [s.grpo_step(model, ex, 8, rng, temperature=20.0) for _ in range(10)]
    assert all(r["groups"] == 4 for r in recs) and sum(r["used"] for r in recs) >= 20
    assert margin() > m0 + 1.0
    assert s.evaluate(model, ex)["score_expected"] >= before


def test_train_script_writes_curves_summary_and_adapters(tmp_path):
    import json

    from tests.helpers.tiny_tunix import tiny_folder

    s = _script()
    data = tmp_path / "toy.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in toy_rows([10, 11, 12, 40, 41])))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ENVENGINEER_CACHE", str(tmp_path / "cache"))
        folder = tiny_folder(tmp_path / "tiny", rope_theta=50_000.0, json_text=True)
        assert s.main(["--data", str(data), "--out", str(tmp_path / "out"), "--model",
                       str(folder), "--train-seeds", "10-12", "--heldout-seeds", "40-41",
                       "--seeds", "0,1", "--sft-steps", "2", "--grpo-steps", "2",
                       "--contexts", "2", "--group", "4", "--eval-every", "2", "--rank", "4",
                       "--alpha", "8"]) == 0
    out = tmp_path / "out"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["train_contexts"] == 3 and summary["heldout_contexts"] == 2
    for seed in ("0", "1"):
        curve = summary["curves"][seed]
        assert [c["update"] for c in curve if "top1" in c] == [0, 2, 4]
        assert [c["phase"] for c in curve] == ["start", "sft", "sft", "grpo", "grpo"]
        assert (out / f"adapter-seed{seed}.safetensors").is_file()
    assert (out / "curves.png").stat().st_size > 1000
    card = s.model_card("toy", s.argparse.Namespace(
        rank=4, alpha=8.0, data=[str(data)], train_seeds="10-12", heldout_seeds="40-41",
        sft_steps=2, grpo_steps=2, batch=2, contexts=2, group=4), summary,
        summary["curves"]["0"], 0)
    assert "| top1 |" in card and "train_engineer.py" in card and "float16" in card
    assert f"`{data.name}`: no record of its making" in card
    (tmp_path / "toy.jsonl.meta.json").write_text(json.dumps({"invocations": [
        {"command": ["python", "scripts/engineer_data.py", "--seeds", "10-12"],
         "commit": "abcdef0123"}]}))
    assert "`python scripts/engineer_data.py --seeds 10-12` (commit abcdef0)" in \
        s.dataset_commands([str(data)])

    # --init: training continues from an adapter (its rank and alpha), whose card is kept
    first = out / "adapter-seed0.safetensors"
    (out / "MODEL_CARD.md").write_text("# Engineer adapter `first`\n\n- data: toy\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ENVENGINEER_CACHE", str(tmp_path / "cache"))
        assert s.main(["--data", str(data), "--out", str(tmp_path / "again"), "--model",
                       str(folder), "--init", str(first), "--train-seeds", "10-12",
                       "--heldout-seeds", "40-41", "--seeds", "0", "--sft-steps", "0",
                       "--grpo-steps", "0"]) == 0
    again = json.loads((tmp_path / "again" / "summary.json").read_text())
    assert (again["rank"], again["alpha"]) == (4, 8.0) and str(first) in again["init"]
    end = [c for c in summary["curves"]["0"] if "top1" in c][-1]
    start = again["curves"]["0"][0]
    assert start["score_expected"] == pytest.approx(end["score_expected"], rel=1e-4)
    card = s.model_card("again", s.argparse.Namespace(
        rank=4, alpha=8.0, data=[str(data)], train_seeds="10-12", heldout_seeds="40-41",
        sft_steps=0, grpo_steps=0, batch=2, contexts=2, group=4, init=str(first)), again,
        again["curves"]["0"], 0)
    assert f"started from: file: {first}" in card
    assert "## The adapter it started from\n\n## Engineer adapter `first`" in card
    with pytest.raises(SystemExit, match="--init: no adapter 'nosuch'"):
        s.main(["--data", str(data), "--out", str(tmp_path / "bad"), "--init", "nosuch",
                "--train-seeds", "10-12", "--heldout-seeds", "40-41"])


def test_adapter_option_loads_applies_and_writes_a_grammar_valid_reply(trained, tmp_path):
    """`--adapter PATH`: the backend merges the LoRA into the base (once, cached by hash) and
    its constrained replies parse as one admitted move; `--adapter none` is the base model,
    reply for reply."""
    pytest.importorskip("outlines", reason="the transformers backend needs the llm extra")
    import torch

    from designer.engineer.adapters import describe, resolve
    from designer.engineer.moves import apply_moves, moves_schema
    from designer.llm.hf import TransformersBackend
    from designer.llm.open import open_backend
    from designer.settings import RunSettings

    s, model, ex, _, _, path = trained
    lrn = model.learner
    lrn.load_adapter(path)  # the SFT state (a later test may have trained on)
    space = _space()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ENVENGINEER_CACHE", str(tmp_path / "cache"))
        merged = TransformersBackend(lrn.folder, adapter=path, threads=1, cache=False)
        again = TransformersBackend(lrn.folder, adapter=path, threads=1, cache=False)
        assert merged.model == again.model != lrn.folder.name  # one merge, cached
        # applies: the merged torch model scores a reply as the tunix LoRA does
        target = s.sft_target(ex[0])
        ids = lrn.prompt_ids(ex[0].messages)
        done = lrn.completion_ids(target)
        with torch.inference_mode():
            logits = merged.lm(torch.tensor([ids + done])).logits[0].float()
        lp = torch.log_softmax(logits[len(ids) - 1:-1], -1)
        torch_lp = float(lp[torch.arange(len(done)), torch.tensor(done)].sum())
        np.testing.assert_allclose(torch_lp, lrn.logprob(ex[0].messages, [target])[0],
                                   rtol=1e-3)
        schema = moves_schema(space, space.default(), None, max_moves=1)
        for r in merged.generate(ex[0].messages, schema, n=3, max_tokens=288, seed=0):
            assert r.error is None, (r.error, r.text)
            out = apply_moves(space, r.edit, space.default(), None, constrained=True)
            assert out.ok and len(out.moves) == 1, out.rejection
        # none: the base model's replies, reply for reply
        base = TransformersBackend(lrn.folder, threads=1, cache=False)
        plain = open_backend(RunSettings(model=str(lrn.folder), adapter="none"), None)
        a = base.generate(ex[1].messages, schema, n=2, max_tokens=288, seed=3)
        b = plain.generate(ex[1].messages, schema, n=2, max_tokens=288, seed=3)
        assert [r.text for r in a] == [r.text for r in b]
    assert resolve("none") is None and describe("none").startswith("none")
    assert resolve(str(path)) == path and "sha256" in describe(str(path))
    with pytest.raises(ValueError, match="no adapter"):
        resolve("no-such-adapter")
    with pytest.raises(ValueError, match="adapter"):
        RunSettings(engineer="rules", adapter=str(path))
