"""vLLM in-process (GPU): `vllm.LLM.generate` with structured outputs (the vLLM >= 0.12 API).

The reply's JSON schema goes in `SamplingParams(structured_outputs=StructuredOutputsParams(
json=schema))` (the `guided_*` fields were removed in vLLM 0.12); the `n` replies come from
one request (`SamplingParams.n`) sampled with `seed`. The prompt is the model's chat
template applied by vLLM's tokenizer, sent as token ids, so `count_tokens` measures exactly
what is sent. Optional: `pip install -e '.[vllm]'` on a machine with a GPU; vLLM is imported
only when this backend is made. To share one model between many runs, serve it
(`vllm serve MODEL`) and use the `openai` backend instead.

`model=` is a local model folder; a GGUF file, or nothing (the embedded SmolLM2), is first
converted into a plain folder by the model cache (`policy.llm.models.model_folder`).
Nothing is downloaded (`HF_HUB_OFFLINE=1` is set before vLLM is imported).

vLLM's offline API has no per-request time limit, so each call runs in one worker thread and
the caller waits at most `timeout_s`: past it the call raises `BackendError`, and so does
every call until the late one has finished (the engine serves one call at a time). Engine
errors (`RuntimeError`) are retried with backoff, then raise `BackendError`.
"""

from __future__ import annotations

import concurrent.futures
import os
import time
from pathlib import Path
from typing import Any

from designer.llm.base import BackendError, Messages, Reply, make_reply, with_retries


def sampling_params(schema: dict | None, *, n: int, max_tokens: int, seed: int,
                    temperature: float, top_p: float) -> Any:
    """The `vllm.SamplingParams` of one request (apart, so it can be checked alone)."""
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    structured = None if schema is None else StructuredOutputsParams(json=schema)
    return SamplingParams(n=n, max_tokens=max_tokens, seed=seed, temperature=temperature,
                          top_p=top_p, structured_outputs=structured)


class VLLMBackend:
    """vLLM with structured outputs (see the module docstring)."""

    name = "vllm"
    constrained = True

    def __init__(self, model: str | Path | None = None, *, temperature: float = 0.7,
                 top_p: float = 0.95, timeout_s: float = 300.0, attempts: int = 2,
                 backoff_s: float = 1.0, max_model_len: int = 4096,
                 gpu_memory_utilization: float = 0.5, **engine_kwargs: Any):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            from vllm import LLM
        except ImportError as e:
            raise BackendError(f"the vllm backend needs vLLM and a GPU "
                               f"(pip install -e '.[vllm]'): {e}") from None
        from designer.llm.base import model_errors
        from policy.llm.models import model_folder

        with model_errors():
            folder = model_folder(model)
        try:
            self.llm = LLM(model=str(folder), max_model_len=max_model_len,
                           gpu_memory_utilization=gpu_memory_utilization, seed=0,
                           **engine_kwargs)
        except Exception as e:  # noqa: BLE001 -- any engine failure means no model
            raise BackendError(f"vLLM could not start {folder}: {type(e).__name__}: "
                               f"{str(e)[:300]}") from None
        self.model = Path(model).name if model is not None else folder.name
        self.temperature, self.top_p = temperature, top_p
        self.timeout_s, self.attempts, self.backoff_s = timeout_s, attempts, backoff_s
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="vllm")
        self._late: concurrent.futures.Future | None = None

    def __repr__(self) -> str:
        return f"VLLMBackend(model={self.model!r})"

    def prompt_ids(self, messages: Messages) -> list[int]:
        tok = self.llm.get_tokenizer()
        text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return list(tok(text, add_special_tokens=False)["input_ids"])

    def count_tokens(self, messages: Messages) -> int:
        return len(self.prompt_ids(messages))

    def _within_time(self, job: Any) -> Any:
        if self._late is not None and not self._late.done():
            raise BackendError(f"vLLM is still busy with a call that ran past "
                               f"{self.timeout_s:g} s")
        future = self._pool.submit(job)
        try:
            return future.result(timeout=self.timeout_s)
        except concurrent.futures.TimeoutError:
            self._late = future
            raise BackendError(f"vLLM call ran past {self.timeout_s:g} s") from None

    def generate(self, messages: Messages, schema: dict | None, n: int = 1,
                 max_tokens: int = 256, seed: int = 0) -> list[Reply]:
        ids = self.prompt_ids(messages)
        params = sampling_params(schema, n=n, max_tokens=max_tokens, seed=seed,
                                 temperature=self.temperature, top_p=self.top_p)
        job = lambda: self.llm.generate([{"prompt_token_ids": ids}], params, use_tqdm=False)
        t = time.perf_counter()
        outs = with_retries(lambda: self._within_time(job), attempts=self.attempts,
                            backoff_s=self.backoff_s,
                            transient=lambda e: isinstance(e, RuntimeError),
                            what=f"vLLM generate ({self.model})")
        dt = time.perf_counter() - t
        if not outs or not getattr(outs[0], "outputs", None):
            raise BackendError("vLLM returned no output")
        replies = []
        for c in outs[0].outputs:
            cut = f"cut at max_tokens={max_tokens}" if c.finish_reason == "length" else None
            replies.append(make_reply(c.text, schema, prompt_tokens=len(ids),
                                      completion_tokens=len(c.token_ids), latency_s=dt,
                                      backend=self.name, model=self.model, cut=cut))
        return replies
