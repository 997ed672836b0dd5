"""The LLM backend a run asks for, logged into its run folder and replayed on resume.

`open_backend(settings, log_path)`: the backend named by `settings.backend` (model,
base_url, and for transformers the engineer's adapter, `designer.engineer.adapters`, whose
origin is printed), wrapped in `LoggedBackend` over the run's call log with
`replay_first=True`, so a resumed run answers its earlier calls from the log (the same
replies, whatever the model would sample now), and a fresh run logs every call. For
`--backend replay`, `--model` names the call log to replay.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from designer.llm import LoggedBackend, make_backend
from designer.llm.base import BackendError
from designer.llm.calllog import CallLog


class LazyBackend:
    """Loads the model at its first use, so that a missing model or a dead server is a
    `BackendError` at that call (the engineer falls back, the run goes on) rather than a
    crash when the run starts."""

    def __init__(self, name: str, options: dict[str, Any]):
        self.name, self._options = name, options
        self.model = str(options.get("model") or "default")
        self.constrained = name in ("transformers", "llamacpp", "vllm")
        self._inner: Any = None

    @property
    def api_key(self) -> str | None:
        """The secret the log must never show (the openai backend's key)."""
        if self.name != "openai":
            return None
        import os

        return os.environ.get(self._options.get("api_key_env", "OPENAI_API_KEY")) or None

    def _get(self) -> Any:
        if self._inner is None:
            self._inner = make_backend(self.name, **self._options)
            self.model = self._inner.model
        return self._inner

    def count_tokens(self, messages: list[dict[str, str]]) -> int:
        try:
            return self._get().count_tokens(messages)
        except BackendError:
            from designer.llm.base import approx_tokens

            return approx_tokens(messages)

    def generate(self, *args: Any, **kwargs: Any) -> Any:
        return self._get().generate(*args, **kwargs)


def open_backend(settings: Any, log_path: str | Path | None) -> LoggedBackend:
    name = settings.backend
    if name == "openai":
        options: dict[str, Any] = {"base_url": settings.base_url, "model": settings.model}
    elif name == "replay":
        if not settings.model:
            raise ValueError("--backend replay needs --model PATH (the calls.jsonl to replay)")
        options = {"log_path": settings.model}
    else:
        options = {"model": settings.model}
        adapter = getattr(settings, "adapter", "none")
        if name == "transformers" and adapter != "none":
            from designer.engineer.adapters import announce

            options["adapter"] = announce(adapter)
    return LoggedBackend(LazyBackend(name, options), CallLog(log_path), replay_first=True)
