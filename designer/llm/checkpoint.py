"""The trainee's current checkpoint as a backend: the ``self`` engineer's model.

``CheckpointBackend(trainee, export_dir)``: at the first call after ``use(key)`` names a new
checkpoint, ``trainee.export_hf(export_dir)`` writes the checkpoint (LoRA merged) as a
transformers folder and a ``TransformersBackend`` is (re)loaded from it; later calls on the
same checkpoint reuse it. Decoding is therefore outlines over transformers, grammar-constrained
exactly like the ``llm`` engineer's default backend. With ``adapter=`` (a LoRA file of the
engineer, ``--adapter``) that LoRA is merged over each export before the load.

Why export rather than constrain tunix's own sampler with outlines-core's index: the export
route reuses the one constrained decoder every engineer already goes through (same grammar
cache, same token accounting, same reply parsing and call log), needs no second
logits-processor integration with tunix's jitted sampler, and the exported folder is also
what any other backend (llama.cpp after conversion, vLLM on a GPU) reads. Its cost is one
export and one load per stage (seconds for SmolLM2-135M, once per checkpoint).

Loading is lazy: a resumed run answers its logged calls from the log (``LoggedBackend`` with
``replay_first``) and never exports. Token counts use the trainee's own tokenizer (the one
the export writes) when it has one, so counting does not force an export either.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from designer.llm.base import BackendError, Messages, Reply


class CheckpointBackend:
    """A constrained transformers backend over the trainee's latest exported checkpoint."""

    name = "self"
    constrained = True

    def __init__(self, trainee: Any, export_dir: str | Path, *,
                 adapter: str | Path | None = None, **options: Any):
        if trainee is None or not callable(getattr(trainee, "export_hf", None)):
            raise ValueError("the self engineer needs --trainee llm (a trainee with "
                             "export_hf(folder) -> Path)")
        self.trainee, self.export_dir, self.options = trainee, Path(export_dir), options
        self.adapter = None if adapter is None else Path(adapter)  # merged over each export
        self.key: Any = None  # the checkpoint the next call must use
        self.loaded: Any = None  # the checkpoint the backend holds
        self.exports = 0  # how many times the checkpoint was exported (and loaded)
        self._backend: Any = None

    @property
    def model(self) -> str:
        return f"checkpoint-{self.key}"

    def __repr__(self) -> str:
        return f"CheckpointBackend(key={self.key!r}, export_dir={self.export_dir})"

    def use(self, key: Any) -> None:
        """Name the current checkpoint (a new key: the next call exports and reloads)."""
        self.key = key

    def backend(self) -> Any:
        """The transformers backend of the current checkpoint (exported and loaded once)."""
        if self._backend is not None and self.loaded == self.key:
            return self._backend
        from designer.llm.hf import TransformersBackend

        self._backend = None  # free the previous checkpoint before loading the next
        try:
            folder = Path(self.trainee.export_hf(self.export_dir))
            if self.adapter is not None:  # the engineer's LoRA over the trainee's weights
                from policy.llm.engineer_rl import merged_model

                folder = merged_model(self.adapter, folder,
                                      out=self.export_dir.with_name("model+adapter"))
        except Exception as e:  # noqa: BLE001 -- any export failure: the engineer falls back
            raise BackendError(f"exporting the trainee checkpoint failed: "
                               f"{type(e).__name__}: {str(e)[:300]}", cause=e) from None
        self._backend = TransformersBackend(folder, cache=False, **self.options)
        self._backend.model = self.model
        self.loaded, self.exports = self.key, self.exports + 1
        return self._backend

    def count_tokens(self, messages: Messages) -> int:
        tok = getattr(self.trainee, "tokenizer", None)
        if tok is None or not callable(getattr(tok, "apply_chat_template", None)):
            return self.backend().count_tokens(messages)
        from designer.llm.hf import TransformersBackend

        return len(TransformersBackend.prompt_ids(SimpleNamespace(tokenizer=tok,
                                                                  model=self.model), messages))

    def generate(self, messages: Messages, schema: dict | None, n: int = 1,
                 max_tokens: int = 256, seed: int = 0) -> list[Reply]:
        replies = self.backend().generate(messages, schema, n=n, max_tokens=max_tokens,
                                          seed=seed)
        for r in replies:
            r.backend = self.name
        return replies
