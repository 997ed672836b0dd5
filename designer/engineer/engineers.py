"""Engineers: whatever proposes the next stage's environment config, behind one interface.

`Engineer.propose(context) -> list[Proposal]`: candidates, best first, each a full set of
valid values of the environment's `ConfigSpace`. Every engineer (fixed, domain randomisation,
learnability sampling, random mutation, rules, an LLM) answers the same call with the same
budget, so a comparison between them is fair. An engineer with `verified = True` has its
candidates judged by the loop's verification and choice rule (`designer.run.scoring`); `fixed` and
`dr` take their own proposal as it is (their candidates are still scored, for the record).
`context.verify(candidates)` scores configs with the current policy for engineers that search
(learnability). Which engineer a run's settings name, and how it is built, is
`designer.engineer.registry`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from designer.engineer.sampling import mutate_values, random_values


@dataclass(frozen=True)
class Proposal:
    """One candidate config: full, valid values of the space, and where they came from."""

    values: dict[str, Any]
    rationale: str = ""
    source: str = ""  # the engineer (and backend) that wrote it
    log_ids: tuple[str, ...] = ()  # LLM call-log records behind it
    adjustments: tuple[dict, ...] = field(default=())  # what projection changed, with reasons


def stage_rng(seed: int, tag: int, stage: int) -> np.random.Generator:
    """The random stream of one engineer at one stage: a resumed run draws the same."""
    return np.random.default_rng([seed, tag, stage])


@runtime_checkable
class Engineer(Protocol):
    """Proposes the next stage's config from what the loop shows it (`context`)."""

    name: str

    def propose(self, context: Any) -> list[Proposal]: ...


class FixedEngineer:
    """The paper's baseline: the first config, kept for every stage."""

    name = "fixed"
    verified = False

    def propose(self, context: Any) -> list[Proposal]:
        return [Proposal(values=dict(context.current), rationale="fixed config",
                         source=self.name)]


class RandomEngineer:
    """Domain randomisation: a fresh uniform config from the space every stage.

    Unverified on purpose (`verified = False`): DR takes whatever it draws; verifying random
    draws is the `learnability` engineer.
    """

    name = "dr"
    verified = False

    def __init__(self, seed: int = 0):
        self.seed = seed

    def propose(self, context: Any) -> list[Proposal]:
        rng = stage_rng(self.seed, 0xD2, context.stage)
        return [Proposal(values=random_values(context.space, rng, context.current),
                         rationale="uniform random config (domain randomisation)",
                         source=self.name)]


class LearnabilityEngineer:
    """SFL-style: sample many random configs, verify them all, keep the most learnable."""

    name = "learnability"
    verified = True

    def __init__(self, seed: int = 0, samples: int = 32, n: int = 4):
        self.seed, self.samples, self.n = seed, samples, n

    def propose(self, context: Any) -> list[Proposal]:
        rng = stage_rng(self.seed, 0x5F1, context.stage)
        cands = [random_values(context.space, rng, context.current) for _ in range(self.samples)]
        scores = context.verify(cands)
        order = sorted(range(len(cands)), key=lambda i: -scores[i].learnability)
        return [Proposal(values=cands[i], source=self.name,
                         rationale=f"random config with learnability "
                                   f"{scores[i].learnability:.3f} (success "
                                   f"{scores[i].success:.3f}{_graded(scores[i])}) among "
                                   f"{self.samples} sampled")
                for i in order[:self.n]]


def _graded(score: Any) -> str:
    """", graded p x" when the score's p is not its success (the return signal)."""
    if getattr(score, "signal", "success") == "success":
        return ""
    return f", {score.signal} {score.p:.3f}"


class MutateEngineer:
    """ACCEL-style: small random edits of the current config, verified like the LLM's."""

    name = "mutate"
    verified = True

    def __init__(self, seed: int = 0, n: int = 4):
        self.seed, self.n = seed, n

    def propose(self, context: Any) -> list[Proposal]:
        rng = stage_rng(self.seed, 0xACE, context.stage)
        return [Proposal(values=mutate_values(context.space, rng, context.current),
                         rationale="random small edit of the current config", source=self.name)
                for _ in range(self.n)]


class RulesEngineer:
    """A hand-written curriculum driven by F (and the fallback when an LLM fails).

    What moves is the task's `designer.tasks.Curriculum` (data, so this engineer knows no
    family): training success above `high` makes every `harder` knob one step harder and widens
    every range, below `low` one step easier and narrower; in between, the `follow` simplex
    knob's weights move halfway toward where the validation split fails; then each cause rule
    whose causes are over its share of the failures moves its knob. The result is projected
    onto the space.
    """

    name = "rules"
    verified = True

    def __init__(self, curriculum: Any = None, low: float = 0.3, high: float = 0.8):
        if curriculum is None:  # the default environment's
            from designer.tasks import DEFAULT_ENV, family_of

            curriculum = family_of(DEFAULT_ENV).curriculum(DEFAULT_ENV)
        self.curriculum, self.low, self.high = curriculum, low, high

    def propose(self, context: Any) -> list[Proposal]:
        space, cur, cu, f = context.space, context.current, self.curriculum, context.failures
        names = set(space.names)
        editable = lambda n: n in names and space[n].editable  # noqa: E731
        edit: dict[str, Any] = {}
        why = []
        p = float(context.train.get("success_rate", 0.5))
        sign = 1 if p > self.high else -1 if p < self.low else 0
        if sign:
            for name, step in cu.harder.items():
                if not editable(name):
                    continue
                x = np.asarray(cur[name], float)
                if space[name].kind == "simplex":
                    idx = np.arange(len(x), dtype=float) / max(len(x) - 1, 1)
                    x = x * ((0.5 + idx) if sign * step > 0 else (1.5 - idx))
                    edit[name] = list(x / max(x.sum(), 1e-12))
                else:
                    edit[name] = (x + sign * step).tolist()
            for lo, hi, step in cu.ranges:
                if not (editable(lo) and editable(hi)):
                    continue
                a, b = sorted((float(cur[lo]), float(cur[hi])))
                a, b = a - sign * step, b + sign * step
                if a > b:  # narrowed past a point: pin the middle
                    a = b = 0.5 * (a + b)
                edit[lo], edit[hi] = a, b
            why.append(f"training success {p:.0%} is {'high' if sign > 0 else 'low'}: "
                       + (cu.what if sign > 0 else cu.easier))
        elif f is not None and cu.follow and editable(cu.follow):
            by_key = f.failures_by_key(cu.follow) or {}
            keys = space[cu.follow].keys or ()
            fail = np.asarray([by_key.get(str(key), 0.0) for key in keys], float)
            if fail.sum() > 0:
                w = np.asarray(cur[cu.follow], float)
                edit[cu.follow] = list(0.5 * w / w.sum() + 0.5 * fail / fail.sum())
                why.append(f"{cu.follow} follows the validation failures")
        if f is not None and cu.rules:
            tot = f.cause_totals()
            n = max(sum(tot.values()), 1)
            for r in cu.rules:
                if editable(r.knob) and sum(tot.get(c, 0) for c in r.causes) / n > r.share:
                    edit[r.knob] = (np.asarray(cur[r.knob], float) + r.step).tolist()
                    why.append(r.why)
        values, adjustments = space.project(edit, cur)
        return [Proposal(values=values, rationale="; ".join(why) or "keep the mix",
                         source=self.name,
                         adjustments=tuple(a.model_dump() for a in adjustments))]


class LLMEngineer:
    """An LLM (any backend) writes the edits, in `single` or `team` mode
    (`designer.engineer.roles`).

    A `BackendError` (dead server, timeout, missing model) or replies none of which apply fall
    back to the `rules` engineer for this stage; the proposals say so in their source,
    `last_prompt` keeps what was asked and answered, and `last_fallback` says why (None when
    the LLM's proposals stood), for the loop to record and show.
    """

    name = "llm"
    verified = True

    def __init__(self, backend: Any, builder: Any, *, roles: str = "single", n: int = 4,
                 max_tokens: int | None = None, seed: int = 0, curriculum: Any = None,
                 edits: str = "values"):
        from designer.engineer.moves import MAX_TOKENS

        if roles not in ("single", "team"):
            raise ValueError(f"roles must be 'single' or 'team', got {roles!r}")
        if edits not in MAX_TOKENS:
            raise ValueError(f"edits must be one of {', '.join(MAX_TOKENS)}, got {edits!r}")
        self.backend, self.builder, self.roles, self.edits = backend, builder, roles, edits
        self.n, self.seed = n, seed
        self.max_tokens = MAX_TOKENS[edits] if max_tokens is None else max_tokens
        self.fallback = RulesEngineer(curriculum)
        self.last_prompt: dict[str, Any] | None = None
        self.last_fallback: str | None = None
        self.count_tokens = getattr(backend, "count_tokens", None)

    @property
    def constrained(self) -> bool:
        """Grammar-constrained backends are parsed strictly; servers' replies are projected."""
        return bool(getattr(self.backend, "constrained", False))

    def propose(self, context: Any) -> list[Proposal]:
        from designer.engineer.moves import NoMoves, moves_per_reply
        from designer.engineer.roles import RoleCall, single, team
        from designer.llm import BackendError

        call = RoleCall(self.backend, self.builder, self.constrained, self.max_tokens,
                        seed=self.seed * 1000 + 10 * context.stage, language=self.edits,
                        moves=moves_per_reply(self.backend.name))
        diagnosis = None
        self.last_fallback = None
        try:
            if self.roles == "single":
                drafts = single(call, context, self.n)
            else:
                drafts, diagnosis = team(call, context, self.n)
        except (BackendError, NoMoves) as e:
            self.last_prompt = {"prompts": call.prompts, "edits": self.edits, "error": str(e),
                                "fallback": "rules"}
            what = "backend error" if isinstance(e, BackendError) else "edit language"
            return self._fallback(context, f"{what}: {e}")
        self.last_prompt = {"prompts": call.prompts, "edits": self.edits,
                            "diagnosis": diagnosis, "drafts": [
            {"reply": d.reply_text, "error": d.error, "verdict": d.verdict,
             "rationale": d.rationale, "log_ids": d.log_ids,
             "adjustments": [a.model_dump() for a in getattr(d.outcome, "adjustments", [])],
             **({"moves": d.outcome.moves, "moves_diagnosis": d.outcome.diagnosis}
                if self.edits == "moves" and d.outcome is not None else {})}
            for d in drafts]}
        source = f"llm:{getattr(self.backend, 'name', '?')}/{getattr(self.backend, 'model', '?')}"
        props = [Proposal(values=d.values, rationale=d.rationale, source=source,
                          log_ids=tuple(d.log_ids), adjustments=tuple(
                              a.model_dump() for a in d.outcome.adjustments))
                 for d in drafts if d.values is not None]
        if not props:
            errors = "; ".join(sorted({str(d.error) for d in drafts}))[:300]
            self.last_prompt["fallback"] = "rules"
            return self._fallback(context, f"no usable reply ({errors})")
        return props

    def _fallback(self, context: Any, why: str) -> list[Proposal]:
        self.last_fallback = " ".join(why.split())[:300]
        return [Proposal(values=p.values, rationale=f"{p.rationale} [fallback: {why}]",
                         source="rules (fallback)", adjustments=p.adjustments)
                for p in self.fallback.propose(context)]


SELF_NEEDS = "the self engineer needs --trainee llm (a trainee with export_hf(folder) -> Path)"


def checkpoint_key(trainee: Any, stage: int) -> Any:
    """Which checkpoint the trainee holds: its ``checkpoint_id`` if it has one, else the
    stage (the loop trains the trainee once per stage, before the engineer is asked)."""
    key = getattr(trainee, "checkpoint_id", None)
    return f"stage-{stage}" if key is None else key


class SelfEngineer(LLMEngineer):
    """The paper's self-design: the current trainee checkpoint writes the next config.

    The backend is `designer.llm.checkpoint.CheckpointBackend`: the checkpoint exported
    (`trainee.export_hf`) and loaded into the transformers/outlines backend, only when it
    changed. Everything else is the `llm` engineer's: the same prompts, the same grammar, the
    same parse/project, the same call log (replayable: a resumed run never re-exports), the
    same verification and fallback.
    """

    name = "self"

    def __init__(self, trainee: Any, builder: Any, *, export_dir: Any, log: Any = None,
                 backend_options: dict[str, Any] | None = None, **kwargs: Any):
        from designer.llm import LoggedBackend
        from designer.llm.calllog import CallLog
        from designer.llm.checkpoint import CheckpointBackend

        if trainee is None or not callable(getattr(trainee, "export_hf", None)):
            raise ValueError(SELF_NEEDS)
        self.trainee = trainee
        self.source = CheckpointBackend(trainee, export_dir, **(backend_options or {}))
        backend = LoggedBackend(self.source, log if log is not None else CallLog(None),
                                replay_first=True)
        super().__init__(backend, builder, **kwargs)

    def propose(self, context: Any) -> list[Proposal]:
        self.source.use(checkpoint_key(self.trainee, context.stage))
        return super().propose(context)
