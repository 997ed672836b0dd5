"""GRPO for the engineer LLM itself: its proposals' verification scores are the rewards.

Each stage the engineer samples n replies to one prompt (the context); verification scores
each reply's config; those scores are a GRPO group. ``EngineerLearner.step(messages, texts,
rewards)`` takes one (or ``steps``) policy-gradient steps on a LoRA of the engineer's model in
JAX (tunix Llama or Qwen3, qwix LoRA through ``tunix_adapter.apply_lora``; the frozen base is the
reference):

    A_i  = (r_i - mean r) / (std r + eps)                       (group-normalised advantage)
    loss = -sum_i A_i sum_t log pi(y_i,t | prompt, y_i,<t) / T   (T: completion tokens)
           + beta * sum_{i,t} KL_k3(pi || base) / T              (optional)

on the exact prompt the backend was fed (the chat template of the logged messages) and the
completion text it wrote (re-tokenised, with the end-of-reply token). A group whose rewards are
all equal has no advantage: the step is skipped. Samples are on-policy (one update per stage),
so no ratio clipping is needed.

The n replies share one prompt (the F/G/H/T context, ~1,600 tokens against replies of ~300), so
every pass runs the prompt once and the completions attend to its keys and values
(``tunix_adapter.shared_prompt_logits``, the GRPO trainee's prompt groups): the same numbers as
n full passes (``tests/policy/llm/test_engineer_rl.py``), for a fraction of the work.

Many contexts per update (the engineer trained offline on scored move tables,
``scripts/train_engineer.py``): ``step_groups`` packs several groups, each its own prompt
(left-padded to one length) and its completions, into one batch; advantages are normalised
within each group and each group's prompt still runs once. ``update`` is the weighted
log-likelihood step both use (weights of one: supervised learning on target replies).

The adapter (the LoRA parameters, float32, plus rank and alpha) is saved as one safetensors
file (``save_adapter``; atomic) and loaded back into a learner of the same model
(``load_adapter``), so a later run can start from it. ``export(out)`` writes the merged model
as a transformers folder (``policy.llm.export``) for the constrained backend;
``merged_model(adapter)`` does so once per adapter file, cached by its hash (``--adapter``).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

BUCKET = 64  # sequence lengths are padded to a multiple of this: few recompiles
MEMORY_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler=false"


def prefer_memory_schedule() -> bool:
    """Ask XLA:CPU for its memory-minimising scheduler; call before JAX starts its backend.

    Its default scheduler orders for parallelism and runs every layer's recomputation (remat)
    before the backward pass needs it, so all layers' attention is live at once: 5.3 GB of
    temporaries for one update on a 640-token prompt with 4 replies of 128 tokens (SmolLM2),
    0.2 GB with this flag (a 1,600-token prompt ran out of 23 GB without it). The flag is
    process-wide (XLA reads it once, and a per-jit compiler option does not reach the CPU
    scheduler in jax 0.10); other backends ignore it. Returns whether it is in effect."""
    import logging

    from jax._src import xla_bridge

    flags = os.environ.get("XLA_FLAGS", "")
    if "concurrency_optimized_scheduler" in flags:
        return MEMORY_FLAG in flags
    if xla_bridge.backends_are_initialized():
        logging.getLogger(__name__).warning(
            "JAX already started: the learning engineer's update keeps every layer's "
            "activations (set XLA_FLAGS=%s before the run to avoid it)", MEMORY_FLAG)
        return False
    os.environ["XLA_FLAGS"] = f"{flags} {MEMORY_FLAG}".strip()
    return True


def advantages(rewards: Any, eps: float = 1e-6) -> np.ndarray:
    """GRPO's group-normalised advantages; all zero when the rewards are all equal."""
    r = np.asarray(rewards, np.float64)
    std = r.std()
    if std < eps:
        return np.zeros_like(r, np.float32)
    return ((r - r.mean()) / (std + eps)).astype(np.float32)


def _completion_logps(model: Any, tokens: Any, valid: Any, prompt: int,
                      group: int | None = None) -> Any:
    """log pi of each completion token, [B, L - prompt], for rows whose groups of ``group``
    consecutive rows (default: all B) share their first ``prompt`` tokens (left-padded
    prompts, right-padded completions): each group's prompt runs once."""
    import jax
    import jax.numpy as jnp

    from policy.llm.tunix_adapter import shared_prompt_logits

    length = tokens.shape[1]
    positions = jnp.clip(jnp.cumsum(valid, axis=-1) - 1, 0).astype(jnp.int32)
    attn = jnp.tril(jnp.ones((length, length), bool))[None] & valid[:, None, :]
    group = tokens.shape[0] if group is None else group
    logits = shared_prompt_logits(model, tokens, positions, attn, prompt, group)
    logits = logits[:, :-1].astype(jnp.float32)
    # the chosen token's logit minus the log-normaliser: no [B, C, V] log-softmax to keep
    chosen = jnp.take_along_axis(logits, tokens[:, prompt:, None], axis=-1)[..., 0]
    return chosen - jax.nn.logsumexp(logits, axis=-1)


def _remat(model: Any) -> None:
    """Recompute each decoder layer in the backward pass (tunix's ``RematConfig.DECODER``):
    without it a 30-layer model keeps every layer's attention for the gradient (63 GB asked
    for 4 rows of 2,000 tokens of SmolLM2 on the CPU)."""
    import dataclasses
    import sys

    # the model's own family (llama3, qwen3): each has its own RematConfig enum
    remat = sys.modules[type(model.config).__module__].RematConfig
    cfg = dataclasses.replace(model.config, remat_config=remat.DECODER)
    for _, module in model.iter_modules():
        if isinstance(getattr(module, "config", None), type(model.config)):
            module.config = cfg


class EngineerLearner:
    """A LoRA of the engineer's model trained on verification rewards (module docstring)."""

    def __init__(self, model: str | Path | None = None, *, rank: int = 16, alpha: float = 32.0,
                 lr: float = 1e-4, beta: float = 0.0, steps: int = 1, mesh: Any = None,
                 loaded: tuple[Any, Any, Path] | None = None, remat: bool = True):
        import optax
        from flax import nnx

        from policy.llm import tunix_adapter as A

        self.mesh = A.make_mesh() if mesh is None else mesh
        base, tok, folder = A.load_model(model, self.mesh) if loaded is None else loaded
        self.base, self.tokenizer, self.folder = base, A.fix_tokenizer(tok), Path(folder)
        self.rank, self.alpha, self.beta, self.steps = rank, alpha, beta, steps
        if remat:
            _remat(base)
        self.model = A.apply_lora(base, self.mesh, rank, alpha)
        self.lr = lr
        self.optimizer = nnx.Optimizer(self.model, optax.adam(lr), wrt=nnx.LoRAParam)
        self.updates = 0
        self._initial = self.lora_arrays()
        beta_ = float(beta)

        def loss_fn(model, tokens, valid, cmask, adv, ref, prompt, group):
            import jax.numpy as jnp

            lp = _completion_logps(model, tokens, valid, prompt, group)
            n = jnp.maximum(cmask.sum(), 1.0)
            loss = -(adv[:, None] * lp * cmask).sum() / n
            if ref is None:  # no KL term: the base model's pass is not run
                return loss, jnp.zeros(())
            d = ref - lp
            kl = ((jnp.exp(d) - d - 1.0) * cmask).sum() / n
            return loss + beta_ * kl, kl

        @nnx.jit(static_argnames=("prompt", "group"))
        def train_step(model, optimizer, tokens, valid, cmask, adv, ref, prompt, group):
            """One update from the whole batch (each group's prompt run once)."""
            grad_fn = nnx.value_and_grad(loss_fn, argnums=nnx.DiffState(0, nnx.LoRAParam),
                                         has_aux=True)
            (loss, kl), grads = grad_fn(model, tokens, valid, cmask, adv, ref, prompt, group)
            optimizer.update(model, grads)
            return loss, kl

        self._train_step = train_step
        self._completion_logps = nnx.jit(_completion_logps, static_argnames=("prompt", "group"))

    # ------------------------------------------------------------------------ data
    def prompt_ids(self, messages: list[dict[str, str]], prefix: str = "") -> list[int]:
        """The ids the transformers backend feeds for ``messages`` (the same code), then
        ``prefix`` (the start of a reply the completions continue, e.g. its diagnosis)."""
        from policy.llm.models import prompt_ids

        ids = prompt_ids(self.tokenizer, messages, "engineer")
        return ids + (self.tokenizer(prefix, add_special_tokens=False)["input_ids"]
                      if prefix else [])

    def completion_ids(self, text: str, ended: bool = True) -> list[int]:
        """The ids of a completion, closed by the end-of-reply token when ``ended``."""
        return self.tokenizer(text, add_special_tokens=False)["input_ids"] + \
            [int(self.tokenizer.eos_token_id)] * bool(ended)

    def pack(self, groups: list[tuple[list[int], list[list[int]]]], bucket: int = BUCKET,
             prompt_len: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int]:
        """(tokens, valid, completion mask, prompt length, group size) for groups of (prompt
        ids, completions' ids), each group as many rows as it has completions (all alike).
        Prompts are left-padded (to at least ``prompt_len``: one compiled shape for a whole
        dataset) and completions right-padded to multiples of ``bucket`` (few compiles); the
        mask is over the completion positions."""
        sizes = {len(c) for _, c in groups}
        if len(sizes) != 1 or 0 in sizes:
            raise ValueError(f"every group needs the same number of completions, got {sizes}")
        eos = int(self.tokenizer.eos_token_id)
        pad = self.tokenizer.pad_token_id
        pad = eos if pad is None else int(pad)
        prompt = -(-max(prompt_len, *(len(p) for p, _ in groups)) // bucket) * bucket
        width = -(-max(len(r) for _, c in groups for r in c) // bucket) * bucket
        rows = [(p, r) for p, c in groups for r in c]
        tokens = np.full((len(rows), prompt + width), pad, np.int32)
        valid = np.zeros(tokens.shape, bool)
        cmask = np.zeros((len(rows), width), np.float32)
        for i, (p, r) in enumerate(rows):
            tokens[i, prompt - len(p):prompt] = p
            valid[i, prompt - len(p):prompt] = True
            tokens[i, prompt:prompt + len(r)] = r
            valid[i, prompt:prompt + len(r)] = True
            cmask[i, :len(r)] = 1.0
        return tokens, valid, cmask, prompt, sizes.pop()

    def batch(self, messages: list[dict[str, str]], texts: list[str],
              ended: list[bool] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """(tokens, valid, completion mask, prompt length) for one prompt and its completions
        (each closed by the end-of-reply token unless ``ended`` says it was cut): `pack` of
        one group."""
        ended = [True] * len(texts) if ended is None else ended
        group = (self.prompt_ids(messages), [self.completion_ids(t, e)
                                             for t, e in zip(texts, ended)])
        return self.pack([group])[:4]

    # ------------------------------------------------------------------------ learning
    def logprob(self, messages: list[dict[str, str]], texts: list[str],
                model: Any = None) -> np.ndarray:
        """sum_t log pi(completion | prompt) of each text (default: the LoRA model)."""
        tokens, valid, cmask, prompt = self.batch(messages, texts)
        with self.mesh:
            lp = self._completion_logps(self.model if model is None else model, tokens, valid,
                                        prompt=prompt)
        return (np.asarray(lp) * cmask).sum(-1)

    def group_logprobs(self, groups: list[tuple[list[int], list[list[int]]]], *,
                       bucket: int = BUCKET, prompt_len: int = 0, model: Any = None
                       ) -> np.ndarray:
        """sum_t log pi of each completion, [groups, group size] (`pack`'s groups; default
        model: the LoRA one). Each group's prompt runs once."""
        tokens, valid, cmask, prompt, g = self.pack(groups, bucket, prompt_len)
        with self.mesh:
            lp = self._completion_logps(self.model if model is None else model, tokens, valid,
                                        prompt=prompt, group=g)
        return (np.asarray(lp) * cmask).sum(-1).reshape(len(groups), g)

    def update(self, groups: list[tuple[list[int], list[list[int]]]], weights: Any, *,
               bucket: int = BUCKET, prompt_len: int = 0) -> dict[str, list[float]]:
        """``steps`` gradient steps on ``-sum weight * log pi(completion) / tokens`` over all
        groups' rows (`pack`; ``weights`` [groups, group size]): GRPO with advantages as
        weights, supervised learning with weights of one. With ``beta`` > 0 the KL to the
        frozen base is added (its pass run once)."""
        tokens, valid, cmask, prompt, g = self.pack(groups, bucket, prompt_len)
        adv = np.asarray(weights, np.float32).reshape(-1)
        out: dict[str, list[float]] = {"losses": [], "kl": []}
        with self.mesh:
            ref = None if self.beta == 0 else self._completion_logps(
                self.base, tokens, valid, prompt=prompt, group=g)
            for _ in range(self.steps):
                loss, kl = self._train_step(self.model, self.optimizer, tokens, valid, cmask,
                                            adv, ref, prompt=prompt, group=g)
                out["losses"].append(float(loss))
                out["kl"].append(float(kl))
        self.updates += 1
        return out

    def step(self, messages: list[dict[str, str]], texts: list[str],
             rewards: Any, ended: list[bool] | None = None) -> dict[str, Any]:
        """``steps`` GRPO updates on one group; returns what happened (for the run folder)."""
        adv = advantages(rewards)
        out: dict[str, Any] = {"rewards": [float(r) for r in rewards],
                               "advantages": adv.tolist(), "losses": [], "kl": []}
        if not texts or not np.any(adv):
            out["skipped"] = "no advantage (the group's rewards are all equal)"
            return out
        ended = [True] * len(texts) if ended is None else ended
        group = (self.prompt_ids(messages), [self.completion_ids(t, e)
                                             for t, e in zip(texts, ended)])
        out.update(self.update([group], adv[None]))
        return out

    def step_groups(self, groups: list[tuple[list[int], list[list[int]]]], rewards: Any,
                    *, bucket: int = BUCKET, prompt_len: int = 0) -> dict[str, Any]:
        """One GRPO update over many groups (many contexts per step): advantages normalised
        within each group; a group whose rewards are all equal carries no signal (weights of
        zero; it stays in the batch, so the compiled shape stays); no update at all when no
        group has a signal."""
        adv = np.stack([advantages(r) for r in rewards]) if len(rewards) else np.zeros((0, 0))
        used = int(sum(np.any(a) for a in adv))
        out: dict[str, Any] = {"groups": len(groups), "used": used, "losses": [], "kl": []}
        if not used:
            out["skipped"] = "no advantage (every group's rewards are all equal)"
            return out
        out.update(self.update(groups, adv, bucket=bucket, prompt_len=prompt_len))
        return out

    def reset(self, lr: float | None = None) -> None:
        """The LoRA back to its initial values, a fresh optimizer (``lr``: a new rate) and no
        updates: a new training run on the same loaded model, compiled steps kept."""
        import jax.numpy as jnp
        import optax
        from flax import nnx

        for path, v in nnx.iter_graph(self.model):
            if isinstance(v, nnx.LoRAParam):
                v.set_value(jnp.asarray(self._initial[".".join(str(p) for p in path)], v.dtype))
        self.lr = self.lr if lr is None else lr
        self.optimizer = nnx.Optimizer(self.model, optax.adam(self.lr), wrt=nnx.LoRAParam)
        self.updates = 0

    # ------------------------------------------------------------------------ adapter
    def lora_arrays(self) -> dict[str, np.ndarray]:
        from flax import nnx

        return {".".join(str(p) for p in path): np.asarray(v.get_value(), np.float32)
                for path, v in nnx.iter_graph(self.model) if isinstance(v, nnx.LoRAParam)}

    def save_adapter(self, path: str | Path) -> Path:
        """The LoRA parameters as one safetensors file (rank, alpha, base model in its
        metadata), written atomically."""
        meta = {"rank": str(self.rank), "alpha": str(self.alpha),
                "base": str(self.folder), "updates": str(self.updates)}
        return write_adapter(self.lora_arrays(), path, meta)

    def load_adapter(self, path: str | Path, start: bool = False) -> dict[str, Any]:
        """Set the LoRA parameters from a saved adapter (same model, rank and alpha);
        ``start``: they also become the values `reset` returns to (training continues from
        this adapter rather than from a fresh LoRA)."""
        import jax.numpy as jnp
        from flax import nnx
        from safetensors import safe_open
        from safetensors.numpy import load_file

        with safe_open(str(path), "np") as h:
            meta = h.metadata() or {}
        if int(meta.get("rank", self.rank)) != self.rank or \
                float(meta.get("alpha", self.alpha)) != self.alpha:
            raise ValueError(f"adapter {path} has rank {meta.get('rank')} alpha "
                             f"{meta.get('alpha')}, this learner {self.rank} {self.alpha}")
        arrays = load_file(str(path))
        mine = {".".join(str(p) for p in path_): v for path_, v in nnx.iter_graph(self.model)
                if isinstance(v, nnx.LoRAParam)}
        if set(arrays) != set(mine):
            raise ValueError(f"adapter {path} does not fit this model's LoRA parameters")
        for k, v in mine.items():
            if arrays[k].shape != v.shape:
                raise ValueError(f"adapter {path}: {k} has shape {arrays[k].shape}, "
                                 f"expected {v.shape}")
            v.set_value(jnp.asarray(arrays[k], v.dtype))
        if start:
            self._initial = self.lora_arrays()
        return json.loads(json.dumps(meta))

    def export(self, out: str | Path) -> Path:
        """The merged model (base + LoRA) as a transformers folder."""
        from policy.llm.export import export_hf

        return export_hf(self.model, self.tokenizer, self.folder, out,
                         lora_scale=self.alpha / self.rank)


def write_adapter(arrays: dict[str, np.ndarray], path: str | Path,
                  meta: dict[str, str]) -> Path:
    """LoRA arrays as one safetensors file with its metadata, written atomically (a reader
    never sees half a file)."""
    from safetensors.numpy import save_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".safetensors", dir=path.parent)
    os.close(fd)
    try:
        save_file(arrays, tmp, metadata=meta)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def adapter_meta(path: str | Path) -> dict[str, str]:
    """A saved adapter's metadata (rank, alpha, base, updates)."""
    from safetensors import safe_open

    with safe_open(str(path), "np") as h:
        return dict(h.metadata() or {})


def merged_model(adapter: str | Path, base: str | Path | None = None,
                 out: str | Path | None = None) -> Path:
    """A transformers folder of ``base`` (default: the embedded SmolLM2) with ``adapter``'s
    LoRA merged in, so that the constrained backend loads it like any model: made once into
    the cache, keyed by the adapter's content hash and the base's folder, or, with ``out``,
    written there each time (replacing what it holds), for a base whose weights change under
    one path (the ``self`` engineer's exported checkpoint)."""
    import hashlib

    from policy.llm.export import COMPLETE
    from policy.llm.models import cache_dir, model_folder

    adapter = Path(adapter)
    if not adapter.is_file():
        raise FileNotFoundError(f"no adapter file {adapter}")
    folder = model_folder(base)
    if out is not None:
        target = Path(out)
    else:
        digest = hashlib.sha256(adapter.read_bytes()
                                + str(folder.resolve()).encode()).hexdigest()
        name = adapter.parent.name if adapter.name == "adapter.safetensors" else adapter.stem
        target = cache_dir() / "adapters" / f"{name}-{digest[:12]}"
        if (target / COMPLETE).is_file():
            return target
    meta = adapter_meta(adapter)
    learner = EngineerLearner(folder, rank=int(meta["rank"]), alpha=float(meta["alpha"]),
                              remat=False)
    learner.load_adapter(adapter)
    return learner.export(target)
