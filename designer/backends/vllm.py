"""vLLM in-process (GPU): `vllm.LLM.chat` with structured outputs (vLLM >= 0.12 API).

The reply's JSON schema goes in `SamplingParams(structured_outputs=StructuredOutputsParams(
json=schema))` (the `guided_*` fields were removed in vLLM 0.12); `n` replies come from one
request. Optional: `pip install -e '.[vllm]'` on a machine with a GPU. To share one model
between many runs, serve it (`vllm serve MODEL`) and use the `openai` backend instead.
"""

from __future__ import annotations

import time
from typing import Any

from designer.backends.base import BackendError, Messages, Reply, make_reply


def sampling_params(schema: dict | None, n: int, max_tokens: int, seed: int,
                    temperature: float) -> Any:
    """The `vllm.SamplingParams` of one request (separate, so it can be tested alone)."""
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    so = None if schema is None else StructuredOutputsParams(json=schema)
    return SamplingParams(n=n, max_tokens=max_tokens, seed=seed, temperature=temperature,
                          structured_outputs=so)


class VLLMBackend:
    name = "vllm"
    constrained = True

    def __init__(self, model: str, *, temperature: float = 0.7, **llm_kwargs: Any):
        try:
            from vllm import LLM
        except ImportError as e:
            raise BackendError(f"the vllm backend needs vLLM and a GPU "
                               f"(pip install -e '.[vllm]'): {e}") from None
        if not model:
            raise BackendError("the vllm backend needs --model (a model path or hub name "
                               "already in the local cache)")
        try:
            self.llm = LLM(model=model, **llm_kwargs)
        except Exception as e:  # noqa: BLE001 -- any engine failure means no model
            raise BackendError(f"vLLM could not start {model}: {e}") from None
        self.model, self.temperature = model, temperature

    def count_tokens(self, messages: Messages) -> int:
        tok = self.llm.get_tokenizer()
        return len(tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=True))

    def generate(self, messages: Messages, schema: dict | None, n: int = 1,
                 max_tokens: int = 256, seed: int = 0) -> list[Reply]:
        params = sampling_params(schema, n, max_tokens, seed, self.temperature)
        t = time.perf_counter()
        try:
            (out,) = self.llm.chat([messages], sampling_params=params, use_tqdm=False)
        except Exception as e:  # noqa: BLE001 -- a failed request is a failed call
            raise BackendError(f"vLLM generate failed: {e}") from None
        dt = time.perf_counter() - t
        return [make_reply(c.text, schema, prompt_tokens=len(out.prompt_token_ids or ()),
                           completion_tokens=len(c.token_ids), latency_s=dt / max(n, 1),
                           backend=self.name, model=self.model) for c in out.outputs]
