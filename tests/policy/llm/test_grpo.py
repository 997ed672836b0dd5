"""The GRPO trainee (policy.llm.grpo) with tunix: the adapter's traps (RoPE theta against
transformers, tokenizer, mesh, per-rollout keys) and GRPO steps that move the parameters.

Needs the tunix extra (skipped without it); uses a tiny random-weight Llama (and Qwen3) built
here (tests/helpers/tiny_tunix.py), never a download."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from designer.tasks.mapf.plans import reward as R
from designer.tasks.mapf.plans import stages

tunix = pytest.importorskip("tunix", reason="the tunix extra is not installed")

IDS = np.array([[5, 9, 17, 3, 30, 41, 7, 12, 22, 19, 8, 33]], np.int32)
TOL = 1e-4  # the logits' tolerance against transformers (absolute and relative)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from tests.helpers.tiny_tunix import tiny_folder

    return tiny_folder(tmp_path_factory.mktemp("tiny") / "m", rope_theta=10_000.0)


@pytest.fixture(scope="module")
def sharp(tmp_path_factory):
    """The tiny model with a full-size output layer and sharp attention (large logits that
    move with the positions: RoPE errors show)."""
    from tests.helpers.tiny_tunix import tiny_folder

    return tiny_folder(tmp_path_factory.mktemp("sharp") / "m", rope_theta=25_000.0,
                       head_scale=1.0, qk_scale=30.0)


@pytest.fixture(scope="module")
def qwen3(tmp_path_factory):
    """A tiny Qwen3 (q/k norms, norm weights not 1) at a rope_theta tunix does not default
    to, with a full-size output layer (large logits: RoPE errors show)."""
    from tests.helpers.tiny_tunix import tiny_folder

    return tiny_folder(tmp_path_factory.mktemp("qwen3") / "m", rope_theta=50_000.0,
                       head_scale=1.0, family="qwen3", qk_scale=8.0)


def _logits_both(folder):
    import torch
    from transformers import AutoModelForCausalLM

    from policy.llm import tunix_adapter as A

    lm, tok, _ = A.load_model(folder)
    hf = AutoModelForCausalLM.from_pretrained(str(folder)).eval()
    ids = IDS
    length = ids.shape[1]
    attn = jnp.tril(jnp.ones((length, length), bool))[None]
    pos = jnp.arange(length)[None]
    with torch.no_grad():
        ref = hf(torch.tensor(ids, dtype=torch.long)).logits.numpy()
    fixed = np.asarray(lm(jnp.asarray(ids), pos, None, attn)[0])
    with A.rope_unfixed():
        raw = np.asarray(lm(jnp.asarray(ids), pos, None, attn)[0])
    return ref, fixed, raw, lm.config.rope_theta


@pytest.mark.slow
def test_rope_theta_matches_transformers(sharp):
    """tunix (through the adapter) and transformers agree at rope_theta = 2.5e4; without the
    adapter's fix tunix 0.1.7 runs at 1e6 and does not."""
    from policy.llm import tunix_adapter as A

    ref, fixed, raw, theta = _logits_both(sharp)
    assert theta == 25_000.0  # the folder's, neither the loader's fallback nor tunix's default
    np.testing.assert_allclose(fixed, ref, atol=TOL, rtol=TOL)
    if A.rope_bug_present():  # the bug the fix exists for is still there: far outside TOL
        assert np.abs(raw - ref).max() > 100 * max(np.abs(fixed - ref).max(), 1e-6)
        assert np.abs(raw - ref).max() > 100 * TOL


@pytest.mark.slow
def test_qwen3_loads_by_path_and_matches_transformers(qwen3):
    """A transformers Qwen3ForCausalLM folder loads as tunix's Qwen3 with transformers'
    logits; tunix 0.1.7's Qwen3 attention drops rope_theta too (1e6, not 5e4) and the
    adapter's fix covers it."""
    from tunix.models.qwen3.model import Qwen3

    from policy.llm import tunix_adapter as A

    ref, fixed, raw, theta = _logits_both(qwen3)
    assert theta == 50_000.0
    np.testing.assert_allclose(fixed, ref, atol=TOL, rtol=TOL)
    if A.rope_bug_present("qwen3"):
        assert np.abs(raw - ref).max() > 100 * max(np.abs(fixed - ref).max(), 1e-6)
        assert np.abs(raw - ref).max() > 100 * TOL
    # the engineer learner's remat finds Qwen3's own RematConfig (same logits)
    from tunix.models.qwen3.model import RematConfig

    from policy.llm.engineer_rl import _remat

    lm, _, _ = A.load_model(qwen3)
    assert isinstance(lm, Qwen3) and lm.config.rope_theta == 50_000.0
    _remat(lm)
    assert lm.layers[0].config.remat_config == RematConfig.DECODER
    n = ref.shape[1]
    remat = lm(jnp.asarray(IDS), jnp.arange(n)[None], None, jnp.tril(jnp.ones((n, n), bool))[None])
    np.testing.assert_allclose(np.asarray(remat[0]), ref, atol=TOL, rtol=TOL)


@pytest.mark.slow
def test_qwen3_greedy_decoding_matches_transformers(qwen3):
    """tunix's Sampler (through PlanSampler, greedy) writes transformers' greedy tokens."""
    import torch
    from transformers import AutoModelForCausalLM

    from policy.llm import tunix_adapter as A

    lm, tok, _ = A.load_model(qwen3)
    prompt = A.chat_prompt(tok, [{"role": "user", "content": "Grid 3x3, 2 agents."}])
    n = 6
    text = A.PlanSampler(lm, lm.config, tok, max_prompt=64, max_new=n, batch=8)([prompt])[0]
    hf = AutoModelForCausalLM.from_pretrained(str(qwen3)).eval()
    ids = tok(prompt, return_tensors="pt").input_ids
    with torch.no_grad():
        out = hf.generate(ids, max_new_tokens=n, do_sample=False,
                          eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    want = [t for t in out[0, ids.shape[1]:].tolist() if t != tok.eos_token_id]
    assert len(want) >= 3  # a few tokens before any end of reply
    assert tok(text, add_special_tokens=False).input_ids == want


def test_unsupported_models_are_refused_by_name():
    from policy.llm import tunix_adapter as A

    base = {"num_hidden_layers": 1, "vocab_size": 8, "hidden_size": 8, "intermediate_size": 8,
            "num_attention_heads": 2}
    with pytest.raises(ValueError, match="supported: llama, qwen3"):
        A.model_config({**base, "model_type": "mistral"})
    with pytest.raises(ValueError, match="attention_bias"):
        A.model_config({**base, "model_type": "qwen3", "attention_bias": True})
    with pytest.raises(ValueError, match="rope scaling"):
        A.model_config({**base, "model_type": "qwen3",
                        "rope_scaling": {"rope_type": "yarn", "factor": 4.0}})
    assert A.tied(A.model_config({**base, "model_type": "qwen3", "tie_word_embeddings": True}))
    assert not A.tied(A.model_config({**base, "model_type": "llama"}))


@pytest.mark.slow
def test_tied_embeddings_load_as_the_cache_stores_them(tmp_path, monkeypatch):
    """A tied model saved the way the GGUF cache saves it (only lm_head.weight) loads into
    tunix with the right logits (the embedding is re-exposed under tunix's name)."""
    from safetensors import safe_open

    from tests.helpers.tiny_tunix import tiny_folder

    monkeypatch.setenv("ENVENGINEER_CACHE", str(tmp_path / "cache"))
    folder = tiny_folder(tmp_path / "tied", rope_theta=50_000.0, head_scale=1.0, tied=True)
    with safe_open(str(folder / "model.safetensors"), "np") as h:
        assert "model.embed_tokens.weight" not in set(h.keys())
    ref, fixed, _, _ = _logits_both(folder)
    np.testing.assert_allclose(fixed, ref, atol=1e-4, rtol=1e-4)


@pytest.mark.slow
def test_tokenizer_and_mesh_traps(tiny):
    from transformers import AutoTokenizer

    from policy.llm import tunix_adapter as A

    tok = AutoTokenizer.from_pretrained(str(tiny))
    tok.eos_token, tok.pad_token = "<|im_start|>", None  # what the SmolLM2 GGUF says
    A.fix_tokenizer(tok)
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    mesh = A.make_mesh()
    assert all(t == jax.sharding.AxisType.Auto for t in mesh.axis_types)
    b = A.prompt_batch(["a", "b"], level=[0, 1])
    assert b["prompts"].dtype.kind == "U" and b["level"].tolist() == [0, 1]
    with pytest.raises(ValueError):
        A.prompt_batch(["a"], level=[0, 1])


def _trainee(folder, seed=0, steps=2, checkpoint_dir=None, **small):
    from policy.llm import tunix_adapter as A
    from policy.llm.grpo import GRPOSettings, GRPOTrainee

    lm, tok, _ = A.load_model(folder)
    stage = stages.draw(jax.random.key(0), stages.PRESETS["cpu"], 3)
    stage.reward_config = R.RewardConfig(free_tokens=1, max_tokens=25)
    kw = dict(prompts_per_step=2, group=4, max_new_tokens=24, max_prompt_tokens=640) | small
    s = GRPOSettings(steps=steps, **kw, temperature=1.0, learning_rate=1e-2, seed=seed,
                     checkpoint_dir=checkpoint_dir, checkpoint_every=1)
    return GRPOTrainee(lm, tok, stage, s)


@pytest.fixture(scope="module")
def two_runs(tiny, tmp_path_factory):
    from flax import nnx

    ckpt = tmp_path_factory.mktemp("ckpt")
    a = _trainee(tiny, seed=3, checkpoint_dir=str(ckpt))
    before = jax.tree.map(np.asarray, nnx.state(a.actor, nnx.LoRAParam))
    log_a = a.train()
    after = jax.tree.map(np.asarray, nnx.state(a.actor, nnx.LoRAParam))
    log_b = _trainee(tiny, seed=3).train()
    a.checkpoints = sorted(p.name for p in ckpt.iterdir())
    return before, after, log_a, log_b, a


@pytest.mark.slow
def test_two_grpo_steps_change_the_parameters(two_runs):
    before, after, log, _, _ = two_runs
    assert len(log.reward) == 2
    assert two_runs[-1].checkpoints  # orbax wrote the steps
    diff = jax.tree.map(lambda x, y: float(np.abs(x - y).max()), before, after)
    assert max(jax.tree.leaves(diff)) > 0


@pytest.mark.slow
def test_a_seed_reproduces_a_run(two_runs):
    _, _, a, b, _ = two_runs
    assert a.completions == b.completions
    assert a.reward == b.reward


@pytest.mark.slow
def test_consecutive_rollouts_sample_different_completions(two_runs):
    trainee = two_runs[-1]
    rollout = trainee.cluster.rollout
    config = trainee.cluster.cluster_config.rollout_config
    prompts = trainee.prompts[:1] * 4
    first = rollout.generate(prompts, config).text
    second = rollout.generate(prompts, config).text
    assert first != second


@pytest.mark.slow
@pytest.mark.parametrize("tied", [False, True])
def test_logits_where_read_give_the_same_log_probs(tmp_path, monkeypatch, tied):
    """The adapter's projection of only the read positions (item 6) changes no number tunix
    computes: GRPO's per-token log-probs and logits, and the model's tail, equal tunix's full
    projection; without the patch the model projects every position."""
    from tunix.rl import common

    from policy.llm import tunix_adapter as A
    from tests.helpers.tiny_tunix import tiny_folder

    monkeypatch.setenv("ENVENGINEER_CACHE", str(tmp_path / "cache"))
    folder = tiny_folder(tmp_path / "m", rope_theta=10_000.0, head_scale=1.0, tied=tied)
    lm, _, _ = A.load_model(folder)
    assert A.logits_where_read()
    from flax import nnx

    rng = np.random.default_rng(0)
    prompt = jnp.asarray(rng.integers(3, 40, (3, 12)), jnp.int32).at[0, :4].set(0)  # left pad
    completion = jnp.asarray(rng.integers(3, 40, (3, 7)), jnp.int32).at[1, 5:].set(0)
    kw = dict(pad_id=0, eos_id=2, stop_gradient=True, return_logits=True)
    from tunix.models.llama3 import model as llama

    seen = []  # positions each projection saw
    decode, head = llama.Embedder.decode, llama.Einsum.__call__
    monkeypatch.setattr(llama.Embedder, "decode",
                        lambda self, x: seen.append(x.shape[1]) or decode(self, x))
    if not tied:
        lm.lm_head.__class__ = type("Head", (llama.Einsum,), {
            "__call__": lambda self, x: seen.append(x.shape[1]) or head(self, x)})
    graphdef, state = nnx.split(lm)
    fast = common.compute_per_token_logps(graphdef, state, prompt, completion, **kw)
    with A.logits_everywhere():
        full = common.compute_per_token_logps(graphdef, state, prompt, completion, **kw)
    assert seen == [7 + 1, 12 + 7]
    for a, b in zip(fast, full):
        assert a.shape == b.shape
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-5, rtol=1e-5)

    ids = jnp.asarray(rng.integers(3, 40, (2, 9)), jnp.int32)
    pos = jnp.broadcast_to(jnp.arange(9), (2, 9))
    attn = jnp.tril(jnp.ones((9, 9), bool))[None]
    whole = np.asarray(lm(ids, pos, None, attn)[0])
    last = np.asarray(lm(ids, pos, None, attn, decode_only_last_token=True)[0])
    assert whole.shape[1] == 9 and last.shape[1] == 1
    np.testing.assert_allclose(last[:, 0], whole[:, -1], atol=1e-5, rtol=1e-5)


@pytest.mark.slow
def test_sampling_with_last_position_prefill_is_unchanged(tiny):
    """tunix's sampler takes the adapter's ``decode_only_last_token`` on prefill: greedy
    replies equal those of the full projection."""
    from tunix.generate import sampler as sampler_lib

    from policy.llm import tunix_adapter as A

    lm, tok, _ = A.load_model(tiny)
    c = lm.config
    cache = sampler_lib.CacheConfig(cache_size=64, num_layers=c.num_layers,
                                    num_kv_heads=c.num_kv_heads, head_dim=c.head_dim)
    prompts = ["Grid 3x3, 2 agents.", "A0: (0,0) -> (0,1)", "system user"]

    def greedy():
        s = sampler_lib.Sampler(transformer=lm, tokenizer=tok, cache_config=cache)
        out = s(prompts, max_generation_steps=12, max_prompt_length=32,
                eos_tokens=[int(tok.eos_token_id)])
        return s._supports_decode_only_last_token, out.text

    fast_flag, fast = greedy()
    with A.logits_everywhere():
        full_flag, full = greedy()
    assert fast_flag and not full_flag
    assert fast == full


@pytest.mark.slow
def test_grpo_steps_on_qwen3_change_the_lora(qwen3):
    """The GRPO trainee runs on a Qwen3 as on a Llama: apply_lora finds its projections
    (the same names: attn.q_proj ... mlp.down_proj) and a step moves them."""
    from flax import nnx

    trainee = _trainee(qwen3, seed=1, steps=1, prompts_per_step=1, group=2, max_new_tokens=8)
    lora = nnx.state(trainee.actor, nnx.LoRAParam)
    names = {str(p[-1]) for p, _ in nnx.to_flat_state(lora)}
    assert {"w_lora_a", "kernel_lora_a"} <= names
    before = jax.tree.map(np.asarray, lora)
    log = trainee.train()
    after = jax.tree.map(np.asarray, nnx.state(trainee.actor, nnx.LoRAParam))
    assert len(log.reward) == 1
    diff = jax.tree.map(lambda x, y: float(np.abs(x - y).max()), before, after)
    assert max(jax.tree.leaves(diff)) > 0


@pytest.mark.slow
def test_one_prompt_forward_per_group_gives_the_same_numbers(tmp_path, monkeypatch):
    """``prompt_groups`` (item 7): each group's prompt runs once into a KV cache its
    completions attend to; log-probs, logits and the gradient of a GRPO-like loss equal the
    full pass (rows in consecutive groups, as tunix repeats them; one group left-padded), and
    a batch that is not whole groups runs the full path."""
    from flax import nnx
    from tunix.rl import common

    from policy.llm import tunix_adapter as A
    from tests.helpers.tiny_tunix import tiny_folder

    monkeypatch.setenv("ENVENGINEER_CACHE", str(tmp_path / "cache"))
    lm, _, _ = A.load_model(tiny_folder(tmp_path / "m", rope_theta=10_000.0, head_scale=1.0))
    assert A.logits_where_read()
    rng = np.random.default_rng(1)
    prompts = jnp.asarray(rng.integers(3, 40, (2, 10)), jnp.int32).at[1, :3].set(0)
    prompt = jnp.repeat(prompts, 3, axis=0)  # 2 groups of 3
    completion = jnp.asarray(rng.integers(3, 40, (6, 5)), jnp.int32).at[4, 3:].set(0)
    kw = dict(pad_id=0, eos_id=2, return_logits=True)
    graphdef, state = nnx.split(lm)

    def run(state, p=prompt, c=completion):
        return common.compute_per_token_logps(graphdef, state, p, c, stop_gradient=False, **kw)

    def loss(state):
        logps, _ = run(state)
        return jnp.sum(logps * jnp.arange(1.0, 6.0))

    seen = []  # batch sizes of the layers' inputs
    layer_cls = type(lm.layers[0])
    call = layer_cls.__call__
    monkeypatch.setattr(layer_cls, "__call__",
                        lambda self, x, *a: seen.append(x.shape[:2]) or call(self, x, *a))
    full, g_full = run(state), jax.grad(loss)(state)
    assert set(seen) == {(6, 15)}
    seen.clear()
    with A.prompt_groups(3):
        shared, g_shared = run(state), jax.grad(loss)(state)
        assert set(seen) == {(2, 10), (6, 5)}  # prompts once per group, completions per row
        seen.clear()
        odd = run(state, prompt[:4], completion[:4])  # 4 rows: not whole groups of 3
        assert set(seen) == {(4, 15)}
    for a, b in zip(shared, full, strict=True):
        assert a.shape == b.shape
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=2e-5, rtol=1e-4)
    np.testing.assert_allclose(np.asarray(odd[0]), np.asarray(full[0][:4]), atol=2e-5,
                               rtol=1e-4)
    for a, b in zip(jax.tree.leaves(g_shared), jax.tree.leaves(g_full), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-5, rtol=1e-3)
    assert max(float(jnp.max(jnp.abs(x))) for x in jax.tree.leaves(g_full)) > 0
