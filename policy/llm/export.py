"""A tunix Llama or Qwen3 (LoRA merged) written back as a transformers model folder.

Why: the ``self`` engineer (``designer.engineer.engineers.SelfEngineer``) asks the *current trainee
checkpoint* for the next config, grammar-constrained like every engineer. The constrained
decoder of the project is outlines over transformers (``designer.llm.hf``), so the
checkpoint goes where that backend already reads models: a safetensors folder.

``export_hf(model, tokenizer, source_folder, out)``:

- weights: tunix's layout inverted (``tunix.models.llama3.params`` and ``qwen3.params`` map
  alike: ``q_proj.weight [N*H, D]`` -> transpose -> ``[D, N, H]``, ``o_proj [D, N*H]`` ->
  ``[N, H, D]``, MLP kernels and ``lm_head`` transposed; Qwen3's per-head ``q_norm`` /
  ``k_norm`` as they are); the model's own values are written, so a full fine-tune exports
  too. The family is the source's: its ``config.json`` (model_type) is copied;
- LoRA (qwix): each weight with ``<w>_lora_a`` / ``<w>_lora_b`` siblings becomes
  ``W + (alpha / rank) * A @ B``, qwix's own convention (``qwix/_src/providers/lora.py``:
  ``res + delta * (rule.alpha / rule.rank)``; A holds the contracted dims, B the remaining
  ones, in the weight's axis order). alpha / rank is read from the qwix provider the model
  carries, or given as ``lora_scale``;
- tied embeddings: only ``model.embed_tokens.weight`` is written (``tie_word_embeddings``
  true), which both transformers and ``tunix_adapter.tied_folder`` read;
- ``config.json`` from the source folder (quantisation dropped, float32), the tokenizer as
  the trainee uses it (``save_pretrained``: eos ``<|im_end|>`` and the pad already fixed).

The folder appears whole or not at all: written in a temporary sibling and renamed into place
(a previous export at ``out`` is moved aside first, then deleted).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

COMPLETE = "envengineer-export"  # marks a finished export (with the source it came from)


def _unbox(v: Any) -> np.ndarray:
    value = v.get_value() if hasattr(v, "get_value") else getattr(v, "value", v)
    return np.asarray(value, dtype=np.float32)


def model_arrays(model: Any) -> dict[str, np.ndarray]:
    """Every parameter of an nnx model (LoRA ones included) by dotted path, as float32."""
    from flax import nnx

    out: dict[str, np.ndarray] = {}
    for path, v in nnx.iter_graph(model):
        if isinstance(v, nnx.Variable) and isinstance(v, nnx.Param | nnx.LoRAParam):
            out[".".join(str(p) for p in path)] = _unbox(v)
    return out


def lora_scale_of(model: Any) -> float | None:
    """alpha / rank of the qwix LoRA provider wrapped around ``model``'s call (None: none
    found). qwix keeps the provider only in the closure of the intercepted ``__call__``."""
    try:
        from qwix._src.providers.lora import LoraProvider, LoraRule
    except ImportError:
        return None
    seen: set[int] = set()
    stack: list[Any] = [type(model).__call__]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or len(seen) > 200:
            continue
        seen.add(id(obj))
        if isinstance(obj, LoraProvider):
            scales = {r.alpha / r.rank for r in obj._rules if isinstance(r, LoraRule)}
            if len(scales) == 1:
                return float(scales.pop())
            raise ValueError(f"LoRA rules with different alpha/rank {sorted(scales)}: "
                             "pass lora_scale")
        if hasattr(obj, "func") and hasattr(obj, "args"):  # functools.partial
            stack.extend([obj.func, *obj.args, *obj.keywords.values()])
        for cell in getattr(obj, "__closure__", None) or ():
            with contextlib.suppress(ValueError):  # an empty cell
                stack.append(cell.cell_contents)
        if hasattr(obj, "__wrapped__"):
            stack.append(obj.__wrapped__)
    return None


def merge_lora(arrays: dict[str, np.ndarray], scale: float | None) -> dict[str, np.ndarray]:
    """The plain weights with every LoRA pair folded in: W + scale * A @ B."""
    out = {k: v for k, v in arrays.items() if not k.endswith(("_lora_a", "_lora_b"))}
    pairs = [k[:-len("_lora_a")] for k in arrays if k.endswith("_lora_a")]
    if pairs and scale is None:
        raise ValueError("the model carries LoRA parameters but alpha/rank is unknown: "
                         "pass lora_scale")
    for w in pairs:
        a, b = arrays[w + "_lora_a"], arrays[w + "_lora_b"]
        if w not in out:
            raise ValueError(f"LoRA parameters without their weight {w!r}")
        delta = np.tensordot(a, b, axes=([-1], [0]))
        if delta.size != out[w].size:
            raise ValueError(f"LoRA of {w}: A{a.shape} @ B{b.shape} does not fit "
                             f"W{out[w].shape}")
        out[w] = out[w] + np.float32(scale) * delta.reshape(out[w].shape)
    return out


def hf_state(weights: dict[str, np.ndarray], cfg: Any) -> dict[str, np.ndarray]:
    """transformers ``LlamaForCausalLM`` / ``Qwen3ForCausalLM`` names and layouts of tunix
    llama3 / qwen3 weights (the inverse of ``_get_key_and_transform_mapping`` in
    ``tunix.models.{llama3,qwen3}.params``; Qwen3's q/k norms where the model has them)."""
    from policy.llm.tunix_adapter import tied

    d, n, kv, h = cfg.embed_dim, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
    if getattr(cfg, "num_experts", None):
        raise ValueError("export of a mixture-of-experts model is not implemented")
    out = {"model.embed_tokens.weight": weights["embedder.input_embedding"],
           "model.norm.weight": weights["final_norm.w"]}
    if not tied(cfg):
        out["lm_head.weight"] = weights["lm_head.w"].T
    for i in range(cfg.num_layers):
        p, q = f"layers.{i}.", f"model.layers.{i}."
        out[q + "self_attn.q_proj.weight"] = weights[p + "attn.q_proj.w"].reshape(d, n * h).T
        out[q + "self_attn.k_proj.weight"] = weights[p + "attn.k_proj.w"].reshape(d, kv * h).T
        out[q + "self_attn.v_proj.weight"] = weights[p + "attn.v_proj.w"].reshape(d, kv * h).T
        out[q + "self_attn.o_proj.weight"] = weights[p + "attn.o_proj.w"].reshape(n * h, d).T
        for m in ("gate_proj", "up_proj", "down_proj"):
            out[q + f"mlp.{m}.weight"] = weights[p + f"mlp.{m}.kernel"].T
        out[q + "input_layernorm.weight"] = weights[p + "input_layernorm.w"]
        out[q + "post_attention_layernorm.weight"] = weights[p + "post_attention_layernorm.w"]
        for norm in ("q_norm", "k_norm"):  # Qwen3
            if p + f"attn.{norm}.w" in weights:
                out[q + f"self_attn.{norm}.weight"] = weights[p + f"attn.{norm}.w"]
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in out.items()}


def export_hf(model: Any, tokenizer: Any, source_folder: str | Path, out: str | Path, *,
              lora_scale: float | None = None) -> Path:
    """Write ``model`` (a tunix Llama3 or Qwen3, LoRA merged) as a transformers folder at ``out``
    (see the module docstring); returns ``out``."""
    from safetensors.numpy import save_file

    from policy.llm.tunix_adapter import tied

    source, out = Path(source_folder), Path(out)
    cfg = model.config
    weights = model_arrays(model)
    if any(k.endswith("_lora_a") for k in weights) and lora_scale is None:
        lora_scale = lora_scale_of(model)
    state = hf_state(merge_lora(weights, lora_scale), cfg)
    config = json.loads((source / "config.json").read_text())
    config.pop("quantization_config", None)
    config["tie_word_embeddings"] = tied(cfg)
    config["torch_dtype"] = config["dtype"] = "float32"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-export-", dir=out.parent))
    old = None
    try:
        save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        (tmp / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        if (source / "generation_config.json").is_file():
            shutil.copy2(source / "generation_config.json", tmp / "generation_config.json")
        if hasattr(tokenizer, "save_pretrained"):
            tokenizer.save_pretrained(str(tmp))
        else:  # no tokenizer object: the source's files
            for f in source.iterdir():
                if f.is_file() and f.name.startswith(("tokenizer", "special_tokens", "vocab",
                                                      "merges", "chat_template")):
                    shutil.copy2(f, tmp / f.name)
        (tmp / COMPLETE).write_text(json.dumps({"source": str(source),
                                                "lora_scale": lora_scale}) + "\n")
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=".old-export-", dir=out.parent))
            os.replace(out, old / "x")
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    return out
