"""The one place that knows tunix 0.1.7's traps; an upstream fix should delete code here.

Traps (found with SmolLM2-135M-Instruct on CPU, tunix 0.1.7):

1. RoPE theta: ``tunix.models.llama3.model.Attention.block`` (and ``qwen3``'s, the same code)
   calls ``apply_rope`` without the config's ``rope_theta``, so every model silently runs at
   theta = 1e6 (SmolLM2 uses 1e5: logits drift and greedy decoding diverges after a few
   tokens; Qwen3 uses 1e6, its 2507 models 5e6). ``fix_rope()`` wraps each family's
   ``Attention.block`` so that ``apply_rope`` sees the layer's own theta while it traces; per
   family it is a no-op once tunix passes ``rope_theta`` itself (``rope_bug_present(family)``).
2. Tokenizer: a GGUF chat tokenizer (SmolLM2's) names ``<|im_start|>`` as eos and has no pad;
   a reply must end at ``<|im_end|>`` and pad with ``<|endoftext|>`` (``fix_tokenizer``).
3. Mesh: ``jax.make_mesh`` now defaults to Explicit axes, which breaks tunix's embedding
   lookup; ``make_mesh`` asks for ``AxisType.Auto``.
4. Data: a batch's ``prompts`` must be a numpy array of str (``prompt_batch``).
5. Seeds: ``RolloutConfig(seed=None)`` reuses one key at every rollout, so a GRPO run samples
   the same completions each step; ``seed_each_rollout`` folds the rollout count into a base
   key (different samples each step, reproducible from the seed).

Not a trap but a cost, mended here for the same reason (one place that patches tunix):

6. Logits where read (Llama family; Qwen3 runs as shipped): tunix projects every position
   onto the vocabulary, and XLA does not move the later slice through the matmul. On SmolLM2
   (49,152 words, tied) that is a fifth of a forward pass spent on logits nobody reads: the
   sampler's prefill reads one position, a GRPO log-prob the completion's.
   ``logits_where_read()`` gives ``Llama3.__call__`` tunix's own ``decode_only_last_token``
   switch (its sampler passes it on prefill when the model accepts it) and, inside
   ``tunix.rl.common.compute_per_token_logps``, projects only the last ``completion + 1``
   positions, the ones it slices; the returned log-probs are the same
   (``tests/policy/llm/test_grpo.py``).

7. One prompt forward per group (Llama family): GRPO's reference and policy passes run every
   completion of a group with its own copy of the group's prompt, so on the CPU preset (a
   272-token prompt, 4 completions of 32) four fifths of those passes recompute the same
   prompt. Inside ``prompt_groups(G)`` (``policy.llm.grpo`` wraps its training in it) each
   layer runs the prompt once per group into a KV cache that the group's completions attend
   to, as tunix's own decoding does; gradients flow through both. Same log-probs, logits and
   gradients as the full pass (``tests/policy/llm/test_grpo.py``).

Also here: ``model_config`` (a transformers ``config.json`` -> the tunix ``ModelConfig`` of
the family its ``model_type`` names: ``FAMILIES``, "llama" -> ``tunix.models.llama3``, "qwen3"
-> ``tunix.models.qwen3``; anything else, or a Qwen3 asking for attention biases, sliding
windows or rope scaling that tunix's Qwen3 does not compute, is a ValueError) and
``load_model`` (a safetensors folder of either family, by path, or the embedded SmolLM2 GGUF
converted once through ``policy.llm.models.model_folder``). ``apply_lora`` targets the
projections by the names both families share (``q_proj`` ... ``down_proj``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

_ROPE = threading.local()


# ---------------------------------------------------------------------------- 1. RoPE theta
ROPE_FAMILIES = ("llama3", "qwen3")  # tunix families whose attention drops rope_theta (0.1.7)


def _tunix_model(family: str) -> Any:
    import importlib

    return importlib.import_module(f"tunix.models.{family}.model")


def rope_bug_present(family: str = "llama3") -> bool:
    """True while tunix's ``family`` attention calls ``apply_rope`` without ``rope_theta``."""
    mod = _tunix_model(family)
    block = mod.Attention.block
    src = inspect.getsource(getattr(block, "_envengineer_original", block))
    return "rope_theta" not in src


def fix_rope() -> bool:
    """Make tunix's llama3 and qwen3 attention use their config's ``rope_theta`` (idempotent).

    Returns whether a fix is active (False when no family has the bug any more)."""
    return any([_fix_rope(f) for f in ROPE_FAMILIES])


def _fix_rope(family: str) -> bool:
    mod = _tunix_model(family)
    if getattr(mod.Attention.block, "_envengineer_rope", False):
        return True
    if not rope_bug_present(family):
        return False
    block, apply_rope = mod.Attention.block, mod.apply_rope

    @functools.wraps(apply_rope)
    def rope(inputs, positions, head_dim, rope_theta=None):
        theta = rope_theta if rope_theta is not None else getattr(_ROPE, "theta", None)
        return apply_rope(inputs, positions, head_dim,
                          **({} if theta is None else {"rope_theta": theta}))

    @functools.wraps(block)
    def fixed_block(self, *args, **kwargs):
        old = getattr(_ROPE, "theta", None)
        _ROPE.theta = self.config.rope_theta
        try:
            return block(self, *args, **kwargs)
        finally:
            _ROPE.theta = old

    fixed_block._envengineer_rope = True  # type: ignore[attr-defined]
    fixed_block._envengineer_original = block  # type: ignore[attr-defined]
    mod.apply_rope = rope
    mod.Attention.block = fixed_block
    mod._envengineer_apply_rope = apply_rope
    return True


@contextlib.contextmanager
def rope_unfixed():
    """Tunix's attention as shipped, inside the block (tests show the bug with it)."""
    with contextlib.ExitStack() as stack:
        for family in ROPE_FAMILIES:
            stack.enter_context(_rope_unfixed(_tunix_model(family)))
        yield


@contextlib.contextmanager
def _rope_unfixed(mod: Any):
    block = mod.Attention.block
    original = getattr(block, "_envengineer_original", None)
    if original is None:
        yield
        return
    mod.Attention.block, rope = original, mod.apply_rope
    mod.apply_rope = mod._envengineer_apply_rope
    try:
        yield
    finally:
        mod.Attention.block, mod.apply_rope = block, rope


# ---------------------------------------------------------------------------- 2. tokenizer
def fix_tokenizer(tok: Any) -> Any:
    """A chat tokenizer whose eos ends a reply and whose pad exists (in place; returned).

    ``<|im_end|>`` becomes eos where the vocabulary has it (a GGUF names ``<|im_start|>``);
    a missing pad, or one equal to ``<|im_start|>`` or eos (tunix masks pad tokens out of the
    loss, eos must stay in), becomes ``<|endoftext|>`` where it exists, else eos."""
    vocab = tok.get_vocab()
    if "<|im_end|>" in vocab:
        tok.eos_token = "<|im_end|>"
    if tok.eos_token_id is None:
        raise ValueError("the tokenizer has no eos token (a reply could never end)")
    if tok.pad_token_id in (None, vocab.get("<|im_start|>"), tok.eos_token_id):
        if "<|endoftext|>" in vocab and vocab["<|endoftext|>"] != tok.eos_token_id:
            tok.pad_token = "<|endoftext|>"
        else:
            tok.pad_token = tok.eos_token
    return tok


def chat_prompt(tok: Any, messages: list[dict[str, str]]) -> str:
    """The prompt text of chat ``messages`` (the model's template, generation turn opened)."""
    return tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


# ---------------------------------------------------------------------------- 3. mesh
def make_mesh(fsdp: int = 1, tp: int = 1) -> Any:
    """A ("fsdp", "tp") mesh with Auto axes (Explicit axes break tunix's embedding lookup)."""
    import jax
    from jax.sharding import AxisType

    return jax.make_mesh((fsdp, tp), ("fsdp", "tp"), axis_types=(AxisType.Auto, AxisType.Auto))


# ---------------------------------------------------------------------------- 4. data
def prompt_batch(prompts: Sequence[str], **columns: Sequence[Any]) -> dict[str, np.ndarray]:
    """A tunix training batch: ``prompts`` as a numpy array of str, other columns as arrays."""
    out = {"prompts": np.array([str(p) for p in prompts])}
    for k, v in columns.items():
        if len(v) != len(prompts):
            raise ValueError(f"column {k!r} has {len(v)} rows, prompts {len(prompts)}")
        out[k] = np.asarray(v)
    return out


# ---------------------------------------------------------------------------- 5. seeds
def seed_each_rollout(cluster: Any, seed: int) -> None:
    """Give every rollout of ``cluster`` its own key: fold_in(key(seed), rollout index)."""
    import jax

    rollout = cluster.rollout
    generate = rollout.generate
    base = jax.random.PRNGKey(seed)
    count = {"n": 0}

    @functools.wraps(generate)
    def seeded(prompts, rollout_config, **kwargs):
        key = jax.random.fold_in(base, count["n"])
        count["n"] += 1
        return generate(prompts, dataclasses.replace(rollout_config, seed=key), **kwargs)

    rollout.generate = seeded
    rollout.rollouts_done = lambda: count["n"]


# ---------------------------------------------------------------------------- 6. logits
_TAIL = threading.local()  # what the log-prob trace being built reads (see compute_...)
_GROUPS: list[int] = []  # prompt_groups' stack: rows come in groups of this many


@contextlib.contextmanager
def prompt_groups(group: int):
    """Inside the block, GRPO's log-prob passes forward each group's prompt once (item 7).

    tunix repeats each prompt ``group`` times in consecutive rows (``np.repeat``), and its
    micro-batches are whole groups; a batch whose rows are not a multiple of ``group`` runs
    the full path."""
    _GROUPS.append(int(group))
    try:
        yield
    finally:
        _GROUPS.pop()


def _shared_prompt_tail(model: Any, tokens: Any, positions: Any, mask: Any, prompt: int,
                        group: int) -> Any:
    """Hidden states [B, C + 1, D] of the last prompt position and the C completion positions,
    with each group's prompt run once: per layer, the prompt rows of the group's first member
    fill a KV cache (batch B / group), which is repeated to the group's rows, and the
    completion positions attend to it, as tunix's decoding does. The same numbers as the
    full forward, up to float summation order (``tests/policy/llm/test_grpo.py``)."""
    import jax.numpy as jnp

    b, t = tokens.shape
    first = slice(0, b, group)
    xp = model.embedder.encode(tokens[first, :prompt])
    xc = model.embedder.encode(tokens[:, prompt:])
    pos_p, pos_c = positions[first, :prompt], positions[:, prompt:]
    mask_p, mask_c = mask[first, :prompt], mask[:, prompt:]
    cfg = model.config
    kv = jnp.zeros((b // group, t, cfg.num_kv_heads, cfg.head_dim), xp.dtype)
    empty = {"k": kv, "v": kv, "end_index": jnp.zeros((b // group,), jnp.int32)}
    for layer in model.layers:
        cache, xp = layer(xp, pos_p, empty, mask_p)
        cache = {"k": jnp.repeat(cache["k"], group, 0), "v": jnp.repeat(cache["v"], group, 0),
                 "end_index": jnp.full((b,), prompt, jnp.int32)}
        _, xc = layer(xc, pos_c, cache, mask_c)
    return jnp.concatenate([jnp.repeat(xp[:, -1:], group, 0), xc], axis=1)


@contextlib.contextmanager
def _reading(n: int | None, group: int | None, prompt: int | None):
    """While a model call is traced: project the last ``n`` positions only, and run each
    ``group``'s first ``prompt`` tokens once (what the patched ``Llama3.__call__`` reads)."""
    old = tuple(getattr(_TAIL, k, None) for k in ("n", "group", "prompt"))
    _TAIL.n, _TAIL.group, _TAIL.prompt = n, group, prompt
    try:
        yield
    finally:
        _TAIL.n, _TAIL.group, _TAIL.prompt = old


def shared_prompt_logits(model: Any, tokens: Any, positions: Any, mask: Any, prompt: int,
                         group: int) -> Any:
    """Logits [B, C + 1, V] of the last prompt position and the C completion positions of rows
    whose groups of ``group`` consecutive rows share their first ``prompt`` tokens, through
    the model's own call (so a qwix LoRA, which intercepts that call, applies). With the
    Llama patch (``logits_where_read``) each group's prompt runs once; Qwen3, unpatched, runs
    the full pass and the same positions are sliced."""
    tail = tokens.shape[1] - prompt + 1
    with _reading(tail, group, prompt):
        logits, _ = model(tokens, positions, None, mask)
    return logits[:, -tail:]


def logits_where_read() -> bool:
    """Project onto the vocabulary only where tunix reads the logits (idempotent; items 6
    and 7 of the module docstring). Returns whether the patch is active (False once tunix's
    llama3 has a ``decode_only_last_token`` switch of its own). Apply before building a
    sampler or cluster: tunix's sampler checks the switch when it is built."""
    import jax
    from tunix.models.llama3 import model as llama
    from tunix.rl import common

    call = llama.Llama3.__call__
    if getattr(call, "_envengineer_tail", False):
        return True
    if "decode_only_last_token" in inspect.signature(call).parameters:
        return False

    def __call__(self, input_tokens, positions, cache, attention_mask,
                 decode_only_last_token: bool = False):
        # tunix 0.1.7's Llama3.__call__, plus the projection of the last positions only
        tail = 1 if decode_only_last_token else (
            getattr(_TAIL, "n", None) if cache is None else None)
        group = getattr(_TAIL, "group", None) if cache is None else None
        prompt = getattr(_TAIL, "prompt", None)
        if group and tail is not None and prompt is not None \
                and tail == input_tokens.shape[1] - prompt + 1:
            x = _shared_prompt_tail(self, input_tokens, positions, attention_mask, prompt,
                                    group)
            new_cache = None
        else:
            new_cache = None if cache is None else {}
            x = self.embedder.encode(input_tokens)
            for i, layer in enumerate(self.layers):
                name = f"layer_{i}"
                layer_cache, x = layer(x, positions, cache[name] if cache else None,
                                       attention_mask)
                if cache is not None:
                    new_cache[name] = layer_cache
        if tail is not None and tail < x.shape[1]:
            x = x[:, -tail:]
        x = self.final_norm(x)
        logits = self.embedder.decode(x) if self.config.weight_tying else self.lm_head(x)
        return logits, new_cache

    logps = common.compute_per_token_logps
    raw = logps.__wrapped__
    signature = inspect.signature(raw)

    @functools.partial(jax.jit, static_argnames=("pad_id", "eos_id", "stop_gradient",
                                                 "return_logits", "temperature", "tail",
                                                 "group"))
    def traced(graphdef, state, prompt_tokens, completion_tokens, pad_id, eos_id, images=None,
               stop_gradient=True, return_logits=False, segment_ids=None,
               segment_positions=None, temperature=1.0, *, tail, group):
        # tunix's function, traced with what the model call above reads; tail and group are
        # static, so a trace never serves another setting
        with _reading(tail, group, prompt_tokens.shape[1]):
            return raw(graphdef, state, prompt_tokens=prompt_tokens,
                       completion_tokens=completion_tokens, pad_id=pad_id, eos_id=eos_id,
                       images=images, stop_gradient=stop_gradient, return_logits=return_logits,
                       segment_ids=segment_ids, segment_positions=segment_positions,
                       temperature=temperature)

    def compute_per_token_logps(*args, **kwargs):
        a = signature.bind(*args, **kwargs).arguments
        plain = a.get("segment_ids") is None and a.get("images") is None
        rows = a["prompt_tokens"].shape[0]
        g = _GROUPS[-1] if _GROUPS else 0
        return traced(**a, tail=int(a["completion_tokens"].shape[1]) + 1 if plain else None,
                      group=g if plain and g > 1 and rows % g == 0 else None)

    __call__.__doc__ = call.__doc__
    __call__._envengineer_tail = True  # type: ignore[attr-defined]
    __call__._envengineer_original = call  # type: ignore[attr-defined]
    compute_per_token_logps.__doc__ = logps.__doc__
    compute_per_token_logps._envengineer_original = logps  # type: ignore[attr-defined]
    llama.Llama3.__call__ = __call__
    common.compute_per_token_logps = compute_per_token_logps
    return True


@contextlib.contextmanager
def logits_everywhere():
    """tunix's full projection, as shipped, inside the block (tests compare the two). The
    log-prob jit forgets its traces on the way in and out: a trace holds the projection it
    was traced with (both give the same numbers; only the cost differs)."""
    from tunix.models.llama3 import model as llama
    from tunix.rl import common

    call, logps = llama.Llama3.__call__, common.compute_per_token_logps
    if not getattr(call, "_envengineer_tail", False):
        yield
        return
    llama.Llama3.__call__ = call._envengineer_original
    common.compute_per_token_logps = logps._envengineer_original
    logps._envengineer_original.clear_cache()
    try:
        yield
    finally:
        llama.Llama3.__call__, common.compute_per_token_logps = call, logps
        logps._envengineer_original.clear_cache()


# ---------------------------------------------------------------------------- loading
FAMILIES = {"llama": "llama3", "qwen3": "qwen3"}  # config.json model_type -> tunix.models.X


def read_config(config: dict[str, Any] | str | Path) -> dict[str, Any]:
    """A transformers ``config.json`` as a dict (given as a dict, a folder or the file)."""
    if isinstance(config, dict):
        return config
    p = Path(config)
    return json.loads((p / "config.json" if p.is_dir() else p).read_text())


def family(config: dict[str, Any] | str | Path) -> str:
    """The tunix family (``tunix.models.<family>``) that loads a transformers model."""
    model_type = read_config(config).get("model_type", "llama")
    if model_type not in FAMILIES:
        raise ValueError(f"tunix cannot load model_type {model_type!r} here; supported: "
                         f"{', '.join(sorted(FAMILIES))} (transformers LlamaForCausalLM, "
                         "Qwen3ForCausalLM)")
    return FAMILIES[model_type]


def model_config(config: dict[str, Any] | str | Path) -> Any:
    """tunix ``ModelConfig`` of the model's family from a transformers ``config.json`` (dict,
    folder or file): llama3's for model_type "llama", qwen3's for "qwen3"."""
    c = read_config(config)
    fam = family(c)
    rope = c.get("rope_parameters") or c.get("rope_scaling") or {}
    theta = c.get("rope_theta") or rope.get("rope_theta") or 10_000.0
    heads = int(c["num_attention_heads"])
    common = dict(
        num_layers=int(c["num_hidden_layers"]), vocab_size=int(c["vocab_size"]),
        embed_dim=int(c["hidden_size"]), hidden_dim=int(c["intermediate_size"]),
        num_heads=heads, head_dim=int(c.get("head_dim") or c["hidden_size"] // heads),
        num_kv_heads=int(c.get("num_key_value_heads") or heads), rope_theta=float(theta))
    tied = bool(c.get("tie_word_embeddings", False))
    if fam == "llama3":
        from tunix.models.llama3.model import ModelConfig

        return ModelConfig(**common, norm_eps=float(c.get("rms_norm_eps", 1e-5)),
                           weight_tying=tied)
    # qwen3: what tunix's Qwen3 cannot compute must not load silently wrong
    unsupported = {"attention_bias": bool(c.get("attention_bias")),
                   "use_sliding_window": bool(c.get("use_sliding_window")),
                   "rope scaling": rope.get("rope_type", rope.get("type", "default"))
                   not in ("default", None)}
    if any(unsupported.values()):
        missing = [k for k, v in unsupported.items() if v]
        raise ValueError(f"tunix's Qwen3 does not implement {missing} (the model would load "
                         "and compute something else)")
    from tunix.models.qwen3.model import ModelConfig

    return ModelConfig(**common, norm_eps=float(c.get("rms_norm_eps", 1e-6)),
                       use_tied_embedding=tied)


def tied(cfg: Any) -> bool:
    """Whether a tunix ``ModelConfig`` ties the output layer to the embedding (llama3 says
    ``weight_tying``, qwen3 ``use_tied_embedding``)."""
    return bool(getattr(cfg, "weight_tying", False) or getattr(cfg, "use_tied_embedding", False))


def load_model(model: str | Path | None = None, mesh: Any = None) -> tuple[Any, Any, Path]:
    """(tunix model, fixed HF tokenizer, folder) from a safetensors folder or a GGUF file
    (default: the embedded SmolLM2, converted once into the cache by ``policy.llm.models``).
    The family follows config.json's model_type (``FAMILIES``). Applies the RoPE fix first."""
    import importlib

    from policy.llm.models import import_transformers, model_folder

    fix_rope()
    logits_where_read()
    folder = model_folder(model)
    config = model_config(folder)
    params = importlib.import_module(f"tunix.models.{family(folder)}.params")

    weights = tied_folder(folder)

    _, auto_tok = import_transformers()
    tok = fix_tokenizer(auto_tok.from_pretrained(str(folder), local_files_only=True))
    mesh = make_mesh() if mesh is None else mesh
    with mesh:
        lm = params.create_model_from_safe_tensors(str(weights), config, mesh)
    return lm, tok, folder


def tied_folder(folder: Path) -> Path:
    """A folder tunix can load from ``folder``: itself, unless the model ties its embeddings
    and the file holds only ``lm_head.weight`` (``save_model`` keeps one name of a shared
    tensor; tunix reads the embedding from ``model.embed_tokens.weight``). Then a sibling in
    the cache: links to the files plus the embedding under its tunix name (made once)."""
    import os
    import shutil
    import tempfile

    from safetensors import safe_open
    from safetensors.numpy import save_file

    from policy.llm.models import cache_dir

    files = sorted(folder.glob("*.safetensors"))
    keys: dict[str, Path] = {}
    for f in files:
        with safe_open(str(f), "np") as h:
            keys.update(dict.fromkeys(h.keys(), f))
    if "model.embed_tokens.weight" in keys or "lm_head.weight" not in keys:
        return folder
    # Keyed by the folder's path and its files' sizes and times, not its name alone: two
    # models in folders of the same name must never share (or silently swap) a cache entry.
    import hashlib

    stamp = "|".join(f"{f.resolve()}:{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in files)
    digest = hashlib.sha256(stamp.encode()).hexdigest()[:12]
    target = cache_dir() / "tunix" / f"{folder.name}-{digest}"
    if (target / "embed_tokens.safetensors").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=target.parent))
    try:
        for f in folder.iterdir():
            if f.is_file():
                (tmp / f.name).symlink_to(f.resolve())
        with safe_open(str(keys["lm_head.weight"]), "np") as h:
            emb = h.get_tensor("lm_head.weight")
        save_file({"model.embed_tokens.weight": emb}, str(tmp / "embed_tokens.safetensors"))
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def apply_lora(base: Any, mesh: Any, rank: int = 16, alpha: float = 32.0) -> Any:
    """A LoRA copy of a tunix model (qwix, on every projection: llama3 and qwen3 name them
    alike, ``attn.{q,k,v,o}_proj`` and ``mlp.{gate,up,down}_proj``); the base stays frozen."""
    import qwix
    from tunix.rl import reshard

    provider = qwix.LoraProvider(
        module_path=".*q_proj|.*k_proj|.*v_proj|.*o_proj|.*gate_proj|.*down_proj|.*up_proj",
        rank=rank, alpha=alpha)
    lora = qwix.apply_lora_to_model(base, provider, **base.get_model_input())
    with mesh:
        return reshard.reshard_model_to_mesh(lora, mesh)


# ---------------------------------------------------------------------------- sampling
class PlanSampler:
    """Batched whole-reply sampling with tunix's own sampler, one compiled shape.

    Prompts are left-padded to ``prompt_len`` tokens (a call's longest prompt rounded up to
    64, at most ``max_prompt``) and batches to a multiple of 8 rows (at most ``batch``,
    repeating the last prompt): few compiled shapes, and no prefill wasted on padding (on a
    CPU the prefill dominates). The sampler reads the model's variables at each call: a model
    trained or restored in place (nnx) is sampled as it is now. ``temperature`` 0 is greedy."""

    def __init__(self, model: Any, config: Any, tok: Any, *, max_prompt: int,
                 max_new: int, batch: int):
        from tunix.generate import sampler as sampler_lib

        self.tok, self.max_prompt, self.max_new, self.batch = tok, max_prompt, max_new, batch
        cache = sampler_lib.CacheConfig(cache_size=max_prompt + max_new + 8,
                                        num_layers=config.num_layers,
                                        num_kv_heads=config.num_kv_heads,
                                        head_dim=config.head_dim)
        self.sampler = sampler_lib.Sampler(transformer=model, tokenizer=tok, cache_config=cache)

    def __call__(self, prompts: Sequence[str], *, temperature: float = 0.0, seed: int = 0,
                 prompt_len: int | None = None) -> list[str]:
        """One reply per prompt (in order)."""
        import jax

        plen = min(self.max_prompt, -(-(prompt_len or self.max_prompt) // 64) * 64)
        rows = min(self.batch, -(-len(prompts) // 8) * 8)
        out: list[str] = []
        for start in range(0, len(prompts), rows):
            chunk = list(prompts[start:start + rows])
            n = len(chunk)
            chunk += [chunk[-1]] * (rows - n)
            sampled = {"temperature": temperature, "top_p": 1.0} if temperature > 0 else {}
            res = self.sampler(chunk, max_generation_steps=self.max_new,
                               max_prompt_length=plen,
                               eos_tokens=[int(self.tok.eos_token_id)],
                               seed=jax.random.fold_in(jax.random.PRNGKey(seed), start),
                               **sampled)
            out.extend(str(t) for t in res.text[:n])
        return out
