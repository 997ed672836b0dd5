"""An engineer that learns from the scores of its own candidates (`--learn`).

`LearningEngineer(engineer, learner, root)` wraps an `llm` engineer. Each stage:

1. the engineer proposes as usual (n constrained replies to one prompt, logged);
2. its replies are scored by the loop's own verification (`context.verify`, deterministic in
   the stage: the loop's second scoring of the same candidates gives the same numbers);
3. reward of a reply: `4 p (1 - p)` (learnability scaled to [0, 1]) of its config when its
   p (success, or the graded return: `VerifySettings.signal`) is inside the choice rule's
   [floor, ceiling], else 0; a reply that did not parse,
   was rejected or was cut earns 0. Rewards of one prompt's replies are one GRPO group;
4. `policy.llm.engineer_rl.EngineerLearner.step` updates the LoRA of the engineer's model on
   the exact messages and completion texts of the call (a group with equal rewards: no step);
5. the adapter is saved as `<run>/engineer_lora/stage-XXX.safetensors` with the step's record
   (`stage-XXX.json`: rewards, advantages, loss), the merged model exported to
   `<run>/engineer_lora/model` and the backend reloaded from it for the next stage.

The proposals of the stage are the ones the model wrote before the update (the update
learns from their scores). `learn_from` starts from a saved adapter (a later run reusing an
earlier run's engineer); a resumed run reloads the adapter of its last finished stage.
Only the transformers backend learns: the weights must be local (a folder or a GGUF) for
tunix to load.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

ADAPTERS = "engineer_lora"


def reward_of(score: Any, floor: float, ceiling: float) -> float:
    """The reply's reward: 4 p (1 - p) inside [floor, ceiling], else 0 (module docstring); p is
    the score's graded p (success, or the mean normalised return: `designer.run.scoring`)."""
    p = getattr(score, "p", None)
    p = float(score.success if p is None else p)
    return 4.0 * p * (1.0 - p) if floor <= p <= ceiling else 0.0


class LearningEngineer:
    """An `llm` engineer whose model is trained on its proposals' verification scores."""

    verified = True

    def __init__(self, engineer: Any, learner: Any, root: str | Path, *,
                 floor: float = 0.05, ceiling: float = 0.95, learn_from: str | Path | None = None,
                 reload: Any = None):
        self.engineer, self.root = engineer, Path(root)
        self._learner = learner  # an EngineerLearner, or a callable that makes one (lazy)
        self.floor, self.ceiling, self.learn_from = floor, ceiling, learn_from
        self.reload = reload or self._reload_backend
        self.adapter_stage: int | None = None  # the stage whose adapter the model holds
        self.started = False
        self.name = engineer.name
        self.count_tokens = getattr(engineer, "count_tokens", None)
        self.last_learn: dict[str, Any] | None = None

    @property
    def learner(self) -> Any:
        if callable(self._learner) and not hasattr(self._learner, "step"):
            self._learner = self._learner()
        return self._learner

    @property
    def last_prompt(self) -> Any:
        return self.engineer.last_prompt

    @last_prompt.setter
    def last_prompt(self, value: Any) -> None:
        self.engineer.last_prompt = value

    @property
    def last_fallback(self) -> str | None:
        """Why the wrapped engineer fell back to `rules` at its last proposal, or None."""
        return getattr(self.engineer, "last_fallback", None)

    def adapter_path(self, stage: int) -> Path:
        return self.root / f"stage-{stage:03d}.safetensors"

    # ------------------------------------------------------------------------ model
    def _reload_backend(self, folder: Path) -> None:
        """Decode from `folder` from now on (the llm engineer's logged backend keeps its log)."""
        from designer.llm.hf import TransformersBackend

        logged = self.engineer.backend
        inner = getattr(logged, "inner", None)
        opts = getattr(inner, "_options", {}) if inner is not None else {}
        backend = TransformersBackend(folder, cache=False, **{
            k: v for k, v in opts.items() if k not in ("model",)})
        if inner is not None and hasattr(inner, "_inner"):  # designer.llm.LazyBackend
            inner._inner, inner.model = backend, backend.model
        elif inner is not None:
            logged.inner = backend
        else:
            self.engineer.backend = backend

    def _start(self, stage: int) -> None:
        """Before the first proposal: the adapter of the last finished stage (a resumed
        run), else `learn_from`, else none (the base model as it is)."""
        self.started = True
        previous = [k for k in range(stage) if self.adapter_path(k).is_file()]
        source = (self.adapter_path(previous[-1]) if previous
                  else Path(self.learn_from) if self.learn_from else None)
        if source is None:
            return
        self.learner.load_adapter(source)
        self.adapter_stage = previous[-1] if previous else None
        self.reload(self.learner.export(self.root / "model"))

    # ------------------------------------------------------------------------ propose
    def propose(self, context: Any) -> list[Any]:
        if not self.started:
            self._start(context.stage)
        props = self.engineer.propose(context)
        self.last_learn = self._learn(context, props)
        return props

    def _group(self) -> tuple[list[dict[str, str]] | None, list[str], list[bool], list[bool]]:
        """The prompt of the proposing call, its replies' texts, which became proposals and
        which ended (a reply cut by max_tokens or the time limit has no end token)."""
        lp = self.engineer.last_prompt or {}
        prompts = lp.get("prompts") or []
        drafts = lp.get("drafts") or []
        want = "engineer.md" if getattr(self.engineer, "roles", "single") == "team" \
            else "single.md"
        messages = next((p["messages"] for p in prompts if p.get("template") == want), None)
        ended = [not str(d.get("error") or "").startswith(("cut at", "stopped by"))
                 for d in drafts]
        return messages, [str(d.get("reply") or "") for d in drafts], \
            [d.get("error") is None for d in drafts], ended

    def _learn(self, context: Any, props: list[Any]) -> dict[str, Any]:
        stage = context.stage
        record: dict[str, Any] = {"stage": stage}
        messages, texts, usable, ended = self._group()
        llm_props = [p for p in props if not p.source.startswith("rules")]
        if messages is None or not texts or context.verify is None \
                or len(llm_props) != sum(usable):
            record["skipped"] = "no group of replies (backend error or fallback)"
        else:
            scores = iter(context.verify([p.values for p in llm_props]))
            rewards = [reward_of(next(scores), self.floor, self.ceiling) if ok else 0.0
                       for ok in usable]
            t0 = time.perf_counter()
            record.update(self.learner.step(messages, texts, rewards, ended))
            record["step_s"] = round(time.perf_counter() - t0, 3)
            if "skipped" not in record:
                self.learner.save_adapter(self.adapter_path(stage))
                self.adapter_stage = stage
                self.reload(self.learner.export(self.root / "model"))
        self._write(self.root / f"stage-{stage:03d}.json", record)
        return record

    @staticmethod
    def _write(path: Path, obj: Any) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".tmp-{path.name}")
        tmp.write_text(json.dumps(obj, indent=1) + "\n")
        os.replace(tmp, path)
