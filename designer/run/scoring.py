"""Candidate scoring: every candidate config played by the current policy, in one jitted call.

`CandidateScorer.score(params, candidates, current, key)` stacks the candidates into one batched
config pytree, padded to a fixed `k` (so after the first call verification never recompiles,
whatever the values), generates `episodes` fresh levels from each candidate and plays them with
the current policy (`policy.evaluate.Evaluator`, greedy, inside the same jit; or any trainee's
`evaluator`, e.g. the LLM trainee's batched whole-plan sampler). Per candidate:

- success: the share of successful episodes (the env's `valid` metric, e.g. MAPF's; else its
  `success` metric, e.g. a control task's return threshold; else outcome 0), always recorded;
- the graded p the choice rule reads, by the run's `signal` (`VerifySettings.signal`):
  `success` (p = success) or `return` (p = the mean per-episode `normalized_return` in [0, 1]
  the env reports, e.g. every control family's). Why both: on MAPF success is graded (some
  levels of a distribution solved, others not), but on a control family it is all-or-nothing
  per distribution (a policy balances every variant near its training range or none), so every
  candidate scores 0.0 or 1.0, none lies inside [floor, ceiling] and the loop keeps its config
  forever (docs/experiments/families.md). The normalised return still moves when success does
  not (a pole held 300 of 1,000 steps scores 0.3), so the window and p(1 - p) see how hard a
  candidate is. The default comes from the task (`designer.tasks.VERIFY_DEFAULTS`: `return`
  for the control families, `success` for MAPF, whose choices stay as they were);
- normalized_return: the mean normalised return where the env reports one (else None),
  recorded whatever the signal;
- learnability p(1 - p): highest where the policy succeeds about half the time (or, graded,
  reaches half the best return), the stages that teach most (SFL, Rutherford et al. 2024);
- coverage: for each editable simplex knob with target keys (e.g. the held-out set's map sizes),
  the share of those keys the candidate gives at least `min_share` of its weight; multiplied.
  Target keys the knob cannot express (held-out agent counts above the training capacity) and
  knobs the preset pins are left out: no edit could cover them;
- distance: the mean normalised change from the current config (0 same, 1 opposite bounds).

`choose(scores)`, the documented choice rule: never a candidate whose p (success, or the graded
return) is above `ceiling` (a trivial stage) or below `floor` (a hopeless one); among the rest
the highest learnability,
where learnabilities within `tie` of the best count as equal and the proposer's order decides;
if no candidate is inside [floor, ceiling], keep the current config; or, with `trivial="hardest"`
and every candidate above the ceiling, take the one of lowest p (ties to the proposer's order),
since the current config, a neighbour of all of them, is then as trivial as they are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

import jax
import numpy as np

from policy.evaluate import Evaluator

SIGNALS = ("success", "return")  # what the choice rule's p is (module docstring)
TRIVIAL = ("keep", "hardest")  # the choice when every candidate is above the ceiling


@dataclass(frozen=True)
class Score:
    success: float  # share of successful episodes, whatever the signal
    learnability: float  # p (1 - p)
    coverage: float
    distance: float
    episodes: int
    outcomes: dict[str, float]
    p: float | None = None  # the graded p the choice rule reads; None: success
    signal: str = "success"  # which: success, or return (mean normalised return)
    normalized_return: float | None = None  # mean normalised return, if the env reports one

    def __post_init__(self) -> None:
        if self.p is None:
            object.__setattr__(self, "p", self.success)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Score:
        """A score read back from `candidates.json`; folders written before the graded signal
        hold no p, signal or normalized_return: their p was success."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


@dataclass(frozen=True)
class Choice:
    index: int | None  # the chosen candidate, None: keep the current config
    reason: str


def distance(space: Any, a: Mapping[str, Any], b: Mapping[str, Any]) -> float:
    """Mean normalised change over editable knobs (simplex: total variation distance)."""
    parts = []
    for k in space.knobs:
        if not k.editable:
            continue
        x, y = np.atleast_1d(np.asarray(a[k.name])), np.atleast_1d(np.asarray(b[k.name]))
        if k.kind == "simplex":
            parts.append(0.5 * float(np.abs(x.astype(float) - y.astype(float)).sum()))
        elif k.kind in ("float", "int"):
            span = max(float(k.high) - float(k.low), 1e-12)
            parts.append(float(np.mean(np.abs(x.astype(float) - y.astype(float)))) / span)
        else:
            parts.append(float(np.mean(x != y)))
    return float(np.mean(parts)) if parts else 0.0


def coverage(space: Any, values: Mapping[str, Any], targets: Mapping[str, Sequence[str]],
             min_share: float = 0.02) -> float:
    """Product over editable simplex knobs in `targets` of the share of target keys covered.

    Only the target keys a knob has count: a key it cannot express no edit could cover.
    """
    out = 1.0
    for name, keys in targets.items():
        k = space[name]
        w = dict(zip(k.keys or (), values[name]))
        reachable = [key for key in keys if key in w]
        if not k.editable or not reachable:
            continue
        out *= float(np.mean([w[key] >= min_share for key in reachable]))
    return out


def success_of(result: Any) -> np.ndarray:
    """Per-episode success of an `EvalResult` (see the module docstring: valid, success, or
    outcome 0, the first the environment reports)."""
    m = result.metrics
    return np.asarray(m["valid"] if "valid" in m else m.get("success", result.outcome == 0))


def graded_of(result: Any, signal: str) -> np.ndarray:
    """Per-episode p of an `EvalResult` under `signal` (see the module docstring)."""
    if signal == "success":
        return success_of(result).astype(np.float64)
    if signal == "return":
        if "normalized_return" not in result.metrics:
            raise ValueError("verify signal 'return' needs an environment that reports a "
                             "normalized_return metric (the control families do); use "
                             "signal 'success'")
        return np.asarray(result.metrics["normalized_return"], np.float64)
    raise ValueError(f"unknown verify signal {signal!r} (known: {', '.join(SIGNALS)})")


class CandidateScorer:
    """Scores candidate configs with the current policy (see the module docstring)."""

    def __init__(self, env: Any = None, network: Any = None, *, evaluator: Any = None,
                 k: int = 8, episodes: int = 1024,
                 floor: float = 0.05, ceiling: float = 0.95, tie: float = 0.01,
                 targets: Mapping[str, Sequence[str]] | None = None, space: Any = None,
                 signal: str = "success", trivial: str = "keep"):
        """`evaluator`: any trainee's scorer with `Evaluator`'s call (policy, stacked configs,
        key, n_per_config=) -> per-episode results (`policy.trainee.Trainee.play_candidates`);
        default: the PPO `Evaluator` of (`env`, `network`). `signal`: what p is, success or
        return (the module docstring). `trivial`: what to choose when every candidate is above
        the ceiling, `keep` (none) or `hardest` (the module docstring)."""
        if not 0.0 <= floor < ceiling <= 1.0:
            raise ValueError(f"need 0 <= floor < ceiling <= 1, got {floor}, {ceiling}")
        if signal not in SIGNALS:
            raise ValueError(f"unknown verify signal {signal!r} (known: {', '.join(SIGNALS)})")
        if trivial not in TRIVIAL:
            raise ValueError(f"unknown trivial rule {trivial!r} (known: {', '.join(TRIVIAL)})")
        self.signal, self.trivial = signal, trivial
        self.evaluator = (evaluator if evaluator is not None
                          else Evaluator(env, network, record=False))
        self.space = space if space is not None else self.evaluator.env.config_space
        self.k, self.episodes = k, episodes
        self.floor, self.ceiling, self.tie = floor, ceiling, tie
        self.targets = dict(targets or {})

    @classmethod
    def from_settings(cls, verify: Any, *, evaluator: Any, episodes: int,
                      targets: Mapping[str, Sequence[str]] | None, space: Any
                      ) -> CandidateScorer:
        """The scorer of a run's `VerifySettings` (designer.stage_settings): its choice rule
        is read here, so that a new rule setting touches the settings and this module only.
        `episodes`: the settings' count as the trainee plays it (`Trainee.verify_episodes`)."""
        return cls(evaluator=evaluator, k=verify.k, episodes=episodes, floor=verify.floor,
                   ceiling=verify.ceiling, tie=verify.tie, targets=targets, space=space,
                   signal=verify.signal, trivial=verify.trivial)

    @property
    def compiled(self) -> int:
        """How many programs the verification jit holds (1 after warm-up, never more)."""
        return self.evaluator._cfgs._cache_size()

    def score(self, params: Any, candidates: Sequence[Mapping[str, Any]],
              current: Mapping[str, Any], key: jax.Array) -> list[Score]:
        """One `Score` per candidate, in order (chunks of `k` per jitted call)."""
        out: list[Score] = []
        for start in range(0, len(candidates), self.k):
            chunk = [self.space.validate(c) for c in candidates[start:start + self.k]]
            padded = chunk + [chunk[0]] * (self.k - len(chunk))
            res = self.evaluator(params, self.space.stack(padded),
                                 jax.random.fold_in(key, start), n_per_config=self.episodes)
            res = res.numpy()
            ok = success_of(res)
            ok = ok.reshape(self.k, self.episodes)
            graded = (ok if self.signal == "success"
                      else graded_of(res, self.signal).reshape(self.k, self.episodes))
            nret = res.metrics.get("normalized_return")
            if nret is not None:
                nret = np.asarray(nret, np.float64).reshape(self.k, self.episodes)
            outcome = res.outcome.reshape(self.k, self.episodes)
            for i, values in enumerate(chunk):
                succ = float(ok[i].mean())
                p = float(graded[i].mean())
                out.append(Score(
                    success=succ, learnability=p * (1.0 - p),
                    coverage=coverage(self.space, values, self.targets),
                    distance=distance(self.space, values, current), episodes=self.episodes,
                    outcomes={name: float((outcome[i] == j).mean())
                              for j, name in enumerate(res.outcome_names) if j},
                    p=p, signal=self.signal,
                    normalized_return=None if nret is None else float(nret[i].mean())))
        return out

    def choose(self, scores: Sequence[Score]) -> Choice:
        """The choice rule of the module docstring (on each score's p: success, or the graded
        return)."""
        what = "success" if self.signal == "success" else "normalised return"
        inside = [i for i, s in enumerate(scores) if self.floor <= s.p <= self.ceiling]
        if not inside and scores and self.trivial == "hardest" and all(
                s.p > self.ceiling for s in scores):
            low = min(s.p for s in scores)
            pick = min(i for i, s in enumerate(scores) if s.p <= low + self.tie)
            return Choice(pick, f"every candidate's {what} is above {self.ceiling} (got "
                                f"{[round(s.p, 3) for s in scores]}); candidate {pick}, the "
                                f"hardest ({scores[pick].p:.3f}; ties within {self.tie} go to "
                                "the proposer's order)")
        if not inside:
            return Choice(None, f"no candidate's {what} is inside [{self.floor}, "
                                f"{self.ceiling}] (got {[round(s.p, 3) for s in scores]});"
                                " keeping the current config")
        best = max(scores[i].learnability for i in inside)
        pick = min(i for i in inside if scores[i].learnability >= best - self.tie)
        s = scores[pick]
        also = "" if self.signal == "success" else f" (success {s.success:.3f})"
        return Choice(pick, f"candidate {pick}: {what} {s.p:.3f} inside "
                            f"[{self.floor}, {self.ceiling}]{also}, learnability "
                            f"{s.learnability:.3f} (best {best:.3f}, ties within {self.tie} go "
                            "to the proposer's order)")
