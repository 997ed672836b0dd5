"""What the environment engineer reads: the paper's context modules, rendered within a budget.

Modules (switch any off for ablations, e.g. `modules="F,G"`):
- **F**, failures on the *validation* split (never the held-out set we report), written by the
  task's family (`designer.tasks.failures.Failures`; MAPF's: `designer.tasks.mapf.failures`);
- **G**, guidelines: a plain-text file (the task's, or the user's);
- **H**, history: earlier stages as (config, F summary) pairs, *without round 0* (the paper:
  the model anchors on the round-0 config), at most the last `history_k`, oldest dropped first;
  a config reads as short `knob=value` text (`config_text`), as does the current config;
- **T**, bookkeeping only: stage index, stages in total, env steps per stage and so far (no
  reward formula, no hyperparameters: they cost the paper about 13 points);
- **S** (off by default): the engineer's own summary carried forward: the rationale it wrote
  for the config that was chosen (it hurt in the paper).

The reader may be a 135M model, so F opens with the stage's training success and the
validation table, labels each table's rows and columns, names the weakest cells with the
table's own labels and rounds every number (percents to integers).

Budget: the rendered prompt is measured with the backend's tokenizer (`count_tokens`); while it
is over `token_budget`, parts are dropped or shortened in this order: failure trajectories (the
last first), history entries (oldest first), the per-size cause table (kept for the five sizes
with most failures, then dropped), the S summary, the agents x size table (its means per agent
count kept), the guidelines (cut to their first paragraph, then dropped). What was cut is
listed in `Prompt.cuts`. If the prompt is still over the budget it raises `ContextTooLarge`: a
budget that cannot hold the task is a setting error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from typing import Any

from designer.tasks.failures import Failures

PROMPTS = Path(__file__).parents[1] / "prompts"
MODULES = ("F", "G", "H", "T", "S")
DEFAULT_MODULES = ("F", "G", "H", "T")


class ContextTooLarge(ValueError):
    """The prompt cannot fit the token budget even with every optional part dropped."""


def parse_modules(spec: str | Sequence[str]) -> tuple[str, ...]:
    """'F,G,H,T' (or a sequence) -> the modules in canonical order; unknown names raise."""
    names = [s.strip().upper() for s in (spec.split(",") if isinstance(spec, str) else spec)]
    names = [n for n in names if n]
    bad = [n for n in names if n not in MODULES]
    if bad:
        raise ValueError(f"unknown context module(s) {bad} (known: {','.join(MODULES)})")
    return tuple(m for m in MODULES if m in names)


def template(name: str) -> Template:
    return Template((PROMPTS / name).read_text())


@dataclass
class HistoryEntry:
    stage: int
    values: dict[str, Any]  # the editable knobs of that stage's config
    summary: str  # its F summary


@dataclass
class Context:
    """Everything an engineer may read after a stage (rendered by `ContextBuilder`)."""

    stage: int  # the stage that just finished (0 = round 0)
    stages_total: int
    env_steps_per_stage: int
    env_steps_so_far: int
    current: dict[str, Any]  # the full config the trainee just trained on
    space: Any  # the (preset's) ConfigSpace
    failures: Failures | None = None
    history: list[HistoryEntry] = field(default_factory=list)
    self_summary: str | None = None
    train: dict[str, float] = field(default_factory=dict)
    verify: Callable[[list[dict[str, Any]]], list[Any]] | None = field(default=None, repr=False)


@dataclass
class Prompt:
    messages: list[dict[str, str]]
    tokens: int
    cuts: list[str]


def editable_values(space: Any, values: Mapping[str, Any]) -> dict[str, Any]:
    """The editable knobs of `values`, vectors as {key: value} objects (the edit's shape)."""
    out: dict[str, Any] = {}
    for k in space.knobs:
        if not k.editable:
            continue
        v = values[k.name]
        if k.is_vector:
            v = {key: round(float(x), 3) for key, x in zip(k.keys or (), v)}
        elif isinstance(v, float):
            v = round(v, 3)
        out[k.name] = v
    return out


def config_text(values: Mapping[str, Any]) -> str:
    """Editable values (`editable_values`' shape) as short text: `knob=value`, a vector as
    runs of equal values with their keys, e.g. "hole_ratio=0.4 (3-4), 0.6 (5-10); wait_ratio=0.3
    (all)": a small model reads it more easily than JSON, in far fewer tokens."""
    return "; ".join(f"{name}={_value_text(v)}" for name, v in values.items())


def _value_text(v: Any) -> str:
    """One knob's value: a number, or a vector ({key: value}) as runs of equal values."""
    if not isinstance(v, Mapping):
        return _number(v)
    runs: list[list[str]] = []  # [value, first key, last key]
    for key, x in v.items():
        if runs and _number(x) == runs[-1][0]:
            runs[-1][2] = key
        else:
            runs.append([_number(x), key, key])
    if len(runs) == 1 and len(v) > 1:
        return f"{runs[0][0]} (all)"
    return ", ".join(f"{val} ({lo}{'' if lo == hi else '-' + hi})" for val, lo, hi in runs)


def knobs_text(space: Any) -> str:
    """The editable knobs as the engineer reads them: one line each (description, range,
    default as `config_text` writes values); a pair `X_min`, `X_max` with the same grid and
    descriptions that differ in their first word only shares one line."""
    knobs = [k for k in space.knobs if k.editable]
    lines, i = [], 0
    while i < len(knobs):
        k = knobs[i]
        pair = _pair_description(k, knobs[i + 1]) if i + 1 < len(knobs) else None
        names = f"{k.name}, {knobs[i + 1].name}" if pair else k.name
        desc = pair or k.description
        default = _value_text(dict(zip(k.keys, k.default)) if k.keys else k.default)
        lines.append(f"- {names}: {desc} Range{' (each)' if pair else ''}: {_range_text(k)}. "
                     f"Default: {default}.")
        i += 2 if pair else 1
    return "\n".join(lines)


def _pair_description(a: Any, b: Any) -> str | None:
    """One description for knobs `X_min`, `X_max` alike but for the first word of their
    descriptions ("Lowest / highest gravity ..."), else None."""
    if not (a.name.endswith("_min") and b.name == a.name[:-4] + "_max"):
        return None
    same = all(getattr(a, f) == getattr(b, f)
               for f in ("kind", "low", "high", "step", "keys", "default"))
    (wa, _, ra), (wb, _, rb) = a.description.partition(" "), b.description.partition(" ")
    return f"{wa} / {wb.lower()} {ra}" if same and ra == rb else None


def _range_text(k: Any) -> str:
    keys = k.keys or ()
    over = f"{keys[0]}-{keys[-1]}" if len(keys) > 2 else ", ".join(keys)
    if k.kind == "choice":
        return " | ".join(k.choices or ())
    if k.kind == "bool":
        return "true | false"
    if k.kind == "simplex":
        return f"weights over {over}, renormalised to sum to 1"
    grid = f"{k.low:g} to {k.high:g} in steps of {k.step:g}"
    return f"for each of {over}: {grid}" if k.is_vector else grid


def _number(v: Any) -> str:
    """A value as the context writes it: floats to at most 3 decimals, others as they are."""
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float):
        return f"{round(v, 3):g}" if abs(v) < 1e5 else f"{v:.0f}"
    return str(v)


class ContextBuilder:
    """Renders a `Context` into chat messages within a token budget (module docstring)."""

    def __init__(self, modules: str | Sequence[str] = DEFAULT_MODULES, *,
                 guidelines: str | Path | Sequence[str | Path] | None = None,
                 history_k: int = 3,
                 history_round0: bool = False, n_traj: int = 3,
                 token_budget: int = 1600,
                 count_tokens: Callable[[list[dict[str, str]]], int] | None = None):
        self.modules = parse_modules(modules)
        files = guidelines or PROMPTS / "guidelines.md"
        files = [files] if isinstance(files, str | Path) else list(files)
        self.guidelines = "\n\n".join(Path(f).read_text().strip() for f in files)
        self.history_k, self.n_traj, self.token_budget = history_k, n_traj, token_budget
        self.history_round0 = history_round0
        self.count_tokens = count_tokens or approx_tokens

    def history(self, earlier: Sequence[HistoryEntry]) -> list[HistoryEntry]:
        """H: earlier stages without round 0 (unless `history_round0`), the last `history_k`."""
        kept = [h for h in earlier if h.stage > 0 or self.history_round0]
        return kept[-self.history_k:] if self.history_k > 0 else []

    def sections(self, ctx: Context, *, n_traj: int, n_hist: int, sizes: int | None,
                 cells: bool, with_s: bool, guide: str) -> str:
        out = []
        if "F" in self.modules and ctx.failures is not None:
            out.append(ctx.failures.render(n_traj=n_traj, sizes=sizes, cells=cells))
        if "G" in self.modules and guide:
            out.append("## G: design guidelines\n" + guide)
        hist = self.history(ctx.history)[-n_hist:] if n_hist > 0 else []
        if "H" in self.modules and hist:
            out.append("## H: earlier stages (config -> result)\n" + "\n".join(
                f"stage {h.stage}: {config_text(h.values)} -> {h.summary}" for h in hist))
        if "T" in self.modules:
            out.append(f"## T: bookkeeping\nStage {ctx.stage + 1} of {ctx.stages_total} is done;"
                       f" {ctx.env_steps_per_stage:,} env steps per stage, "
                       f"{ctx.env_steps_so_far:,} so far.")
        if "S" in self.modules and with_s and ctx.self_summary:
            out.append("## S: your own summary of the last stage\n" + ctx.self_summary)
        return "\n\n" + "\n\n".join(out) + "\n" if out else "\n"

    def render(self, ctx: Context, template_name: str = "single.md",
               **fields: str) -> Prompt:
        """System + user messages of `template_name` within the budget."""
        guide_first = self.guidelines.split("\n\n")[0]
        n_hist = len(self.history(ctx.history))
        n_traj = min(self.n_traj, len(ctx.failures.trajectories) if ctx.failures else 0)
        state = {"n_traj": n_traj, "n_hist": n_hist, "sizes": None, "cells": True,
                 "with_s": True, "guide": self.guidelines}
        steps: list[tuple[str, dict]] = []
        for i in range(n_traj, 0, -1):
            steps.append((f"trajectory {i}", {"n_traj": i - 1}))
        for i in range(n_hist, 0, -1):
            steps.append((f"oldest history entry (kept {i - 1})", {"n_hist": i - 1}))
        steps += [("per-size cause table beyond the 5 worst sizes", {"sizes": 5}),
                  ("per-size cause table", {"sizes": 0}), ("S summary", {"with_s": False}),
                  ("agents x size table (means per agent count kept)", {"cells": False}),
                  ("guidelines beyond their first paragraph", {"guide": guide_first}),
                  ("guidelines", {"guide": ""})]
        cuts: list[str] = []
        while True:
            msgs = self._messages(ctx, template_name, state, fields)
            tokens = self.count_tokens(msgs)
            if tokens <= self.token_budget:
                return Prompt(msgs, tokens, cuts)
            if not steps:
                raise ContextTooLarge(f"the prompt needs {tokens} tokens with every optional "
                                      f"part dropped; the budget is {self.token_budget}")
            what, change = steps.pop(0)
            state.update(change)
            cuts.append(what)

    def _messages(self, ctx: Context, template_name: str, state: dict,
                  fields: Mapping[str, str]) -> list[dict[str, str]]:
        subs = {"stage": str(ctx.stage), "knobs": knobs_text(ctx.space),
                "current": config_text(editable_values(ctx.space, ctx.current)), **fields}
        user = template(template_name).safe_substitute(subs, sections=self.sections(ctx, **state))
        system = (PROMPTS / "system.md").read_text().strip()
        return [{"role": "system", "content": system}, {"role": "user", "content": user.strip()}]


def approx_tokens(messages: list[dict[str, str]]) -> int:
    """A tokenizer-free upper estimate (about 3 characters per token), for tests and no-LLM use."""
    return sum(len(m["content"]) for m in messages) // 3 + 4 * len(messages)
