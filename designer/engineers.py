"""Engineers: whatever proposes the next stage's environment config, behind one interface.

`Engineer.propose(context) -> list[Proposal]`: candidates, best first, each a full set of
valid values of the environment's `ConfigSpace`. Every engineer (fixed, domain randomisation,
learnability sampling, random mutation, rules, an LLM) answers the same call with the same
budget, so a comparison between them is fair. An engineer with `verified = True` has its
candidates judged by the loop's verification and choice rule (`designer.verify`); `fixed` and
`dr` take their own proposal as it is (their candidates are still scored, for the record).
`context.verify(candidates)` scores configs with the current policy for engineers that search
(learnability).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from designer.sampling import mutate_values, random_values


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
                                   f"{scores[i].success:.3f}) among {self.samples} sampled")
                for i in order[:self.n]]


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

    Training success above `high`: harder (weight moves to larger maps, holes up); below `low`:
    easier (weight to smaller maps, holes down); in between: map-size weight follows where the
    validation split fails, and if conflicts are a large share of failures, the wait ratio
    rises (levels that teach yielding). The result is projected onto the space.
    """

    name = "rules"
    verified = True

    def __init__(self, low: float = 0.3, high: float = 0.8, step: float = 0.05):
        self.low, self.high, self.step = low, high, step

    def propose(self, context: Any) -> list[Proposal]:
        space, cur = context.space, context.current
        edit: dict[str, Any] = {}
        why = []
        p = float(context.train.get("success_rate", 0.5))
        sizes = space["size_weights"].keys or ()
        w = np.asarray(cur["size_weights"], float)
        idx = np.arange(len(w), dtype=float) / max(len(w) - 1, 1)
        f = context.failures
        if p > self.high:
            w = w * (0.5 + idx)
            edit["hole_ratio"] = [h + self.step for h in cur["hole_ratio"]]
            why.append(f"training success {p:.0%} is high: larger maps, more holes")
        elif p < self.low:
            w = w * (1.5 - idx)
            edit["hole_ratio"] = [h - self.step for h in cur["hole_ratio"]]
            why.append(f"training success {p:.0%} is low: smaller maps, fewer holes")
        elif f is not None and f.causes_by_size:
            fail = np.asarray([sum(f.causes_by_size.get(int(s), {}).values()) for s in sizes],
                              float)
            if fail.sum() > 0:
                w = 0.5 * w / w.sum() + 0.5 * fail / fail.sum()
                why.append("size weights follow the validation failures")
        edit["size_weights"] = list(w / max(w.sum(), 1e-12))
        if f is not None and space["wait_ratio"].editable:
            tot = {c: sum(d.get(c, 0) for d in f.causes_by_size.values()) for c in
                   ("vertex", "edge", "hole", "oob", "timeout")}
            n = max(sum(tot.values()), 1)
            if (tot["vertex"] + tot["edge"]) / n > 0.3:
                edit["wait_ratio"] = [r + 2 * self.step for r in cur["wait_ratio"]]
                why.append("conflicts are over 30% of failures: more levels that need waits")
        values, adjustments = space.project(edit, cur)
        return [Proposal(values=values, rationale="; ".join(why) or "keep the mix",
                         source=self.name,
                         adjustments=tuple(a.model_dump() for a in adjustments))]


class LLMEngineer:
    """An LLM (any backend) writes the edits, in `single` or `team` mode (`designer.roles`).

    A `BackendError` (dead server, timeout, missing model) or replies none of which apply fall
    back to the `rules` engineer for this stage; the proposals say so in their source and
    `last_prompt` keeps what was asked and answered.
    """

    name = "llm"
    verified = True

    def __init__(self, backend: Any, builder: Any, *, roles: str = "single", n: int = 4,
                 max_tokens: int = 200, seed: int = 0):
        if roles not in ("single", "team"):
            raise ValueError(f"roles must be 'single' or 'team', got {roles!r}")
        self.backend, self.builder, self.roles = backend, builder, roles
        self.n, self.max_tokens, self.seed = n, max_tokens, seed
        self.fallback = RulesEngineer()
        self.last_prompt: dict[str, Any] | None = None
        self.count_tokens = getattr(backend, "count_tokens", None)

    @property
    def constrained(self) -> bool:
        """Grammar-constrained backends are parsed strictly; servers' replies are projected."""
        return bool(getattr(self.backend, "constrained", False))

    def propose(self, context: Any) -> list[Proposal]:
        from designer.backends import BackendError
        from designer.roles import RoleCall, single, team

        call = RoleCall(self.backend, self.builder, self.constrained, self.max_tokens,
                        seed=self.seed * 1000 + 10 * context.stage)
        diagnosis = None
        try:
            if self.roles == "single":
                drafts = single(call, context, self.n)
            else:
                drafts, diagnosis = team(call, context, self.n)
        except BackendError as e:
            self.last_prompt = {"prompts": call.prompts, "error": str(e), "fallback": "rules"}
            return self._fallback(context, f"backend error: {e}")
        self.last_prompt = {"prompts": call.prompts, "diagnosis": diagnosis, "drafts": [
            {"reply": d.reply_text, "error": d.error, "verdict": d.verdict,
             "rationale": d.rationale, "log_ids": d.log_ids,
             "adjustments": [a.model_dump() for a in getattr(d.outcome, "adjustments", [])]}
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
        return [Proposal(values=p.values, rationale=f"{p.rationale} [fallback: {why}]",
                         source="rules (fallback)", adjustments=p.adjustments)
                for p in self.fallback.propose(context)]


def make_engineer(settings: Any, folder: Any = None, backend: Any = None) -> Any:
    """The engineer a `RunSettings` names (for `llm`: its backend, logged into the run folder)."""
    s = settings
    if s.engineer == "fixed":
        return FixedEngineer()
    if s.engineer == "dr":
        return RandomEngineer(s.seed)
    if s.engineer == "learnability":
        return LearnabilityEngineer(s.seed, samples=8 * s.candidates, n=s.candidates)
    if s.engineer == "mutate":
        return MutateEngineer(s.seed, n=s.candidates)
    if s.engineer == "rules":
        return RulesEngineer()
    from designer.context import ContextBuilder

    if backend is None:
        from designer.llm import open_backend

        backend = open_backend(s, None if folder is None else folder.path / "calls.jsonl")
    builder = ContextBuilder(s.context, history_k=s.history_k, history_round0=s.history_round0,
                             token_budget=s.token_budget,
                             count_tokens=getattr(backend, "count_tokens", None))
    return LLMEngineer(backend, builder, roles=s.roles, n=s.candidates,
                       max_tokens=s.max_tokens, seed=s.seed)
