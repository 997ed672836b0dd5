"""Compiled reply grammars: one outlines logits processor per JSON schema, kept in a cache.

Shared by the backends that constrain decoding themselves (transformers, llama.cpp). The JSON
is compact (no whitespace between tokens): a small model's replies are shorter and its edit
fits `max_tokens`.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections import OrderedDict
from typing import Any

from designer.llm.base import BackendError, canonical

MAX_SCHEMAS = 16  # compiled grammars kept per backend
WHITESPACE = ""  # between JSON tokens: none


class GrammarCache:
    """outlines' logits processor for a schema (compiled once per schema), None for text."""

    def __init__(self, outlines_model: Any):
        self.model = outlines_model
        self._processors: OrderedDict[str, Any] = OrderedDict()

    def processor(self, schema: dict | None) -> Any:
        if schema is None:
            return None
        key = canonical(schema)  # the cache key; the grammar keeps the schema's key order
        if key in self._processors:
            self._processors.move_to_end(key)
            return self._processors[key]
        import outlines

        try:
            output = outlines.types.JsonSchema(json.dumps(schema), whitespace_pattern=WHITESPACE)
            gen = outlines.Generator(self.model, output)
        except Exception as e:  # noqa: BLE001 -- a schema outlines cannot compile
            raise BackendError(f"outlines could not compile the reply schema: "
                               f"{type(e).__name__}: {str(e)[:300]}") from None
        self._processors[key] = gen.logits_processor
        while len(self._processors) > MAX_SCHEMAS:
            self._processors.popitem(last=False)
        return gen.logits_processor


class LocalDecoder(ABC):
    """What the in-process constrained backends share: a grammar cache and token counting.

    A subclass sets `self._grammars` and defines `prompt_ids(messages)`, the token ids the model
    is fed (its chat template applied).
    """

    _grammars: GrammarCache

    @abstractmethod
    def prompt_ids(self, messages: Any) -> list[int]:
        """The token ids the model is fed for `messages`."""

    def count_tokens(self, messages: Any) -> int:
        return len(self.prompt_ids(messages))

    def processor(self, schema: dict | None) -> Any:
        """outlines' logits processor for `schema` (None: free text)."""
        return self._grammars.processor(schema)
