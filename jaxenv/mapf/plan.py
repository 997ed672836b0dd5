"""Whole plans for MAPF-FrozenLake: the format, a strict parser, and a jitted verifier.

Format
------
A plan gives every agent ``Ai`` the sequence of cells it occupies at times 0, 1, 2, ...,
starting with its start cell; waiting is repeating a cell. Shorter sequences are padded by
repeating their last cell (an agent that finished stays), as in docs/rules.md "Whole plans".

- Python form: ``dict[int, list[(row, col)]]`` (agent index -> cells), or a list of paths.
- Text form (what an LLM writes; ``format_plan`` writes it)::

      A0: (0,0) -> (0,1) -> (1,1)
      A1: (2,2) -> (2,2) -> (2,1)

  Labels ``A0``, ``Agent 0``, ``Agent A0`` (optionally bulleted, bold or quoted), then ``:`` or
  ``=``; cells ``(r, c)`` or ``[r, c]`` separated by ``->``, ``→``, ``=>``, commas, semicolons,
  spaces, brackets or parentheses (``((0,0), (0,1))``); one trailing period is allowed. Lines
  without a label are prose: they are ignored and listed in ``ParseReport.ignored``.
- JSON form: ``{"A0": [[0,0],[0,1]], "A1": [...]}`` (keys ``A0``/``Agent 0``/``0``), a list of
  paths (position = agent), or either of those under a single ``"plan"``/``"paths"``/
  ``"solution"`` key; a path may also be a string in the text form. JSON is used when the
  reply (or its first ```json fence) starts with ``{`` or ``[``.
- Array form (for JAX): ``cells [P, T, 2] int32`` with ``length [P] int32`` (0 = no path for
  that agent row) and ``parsed_ok [] bool``. ``plan_arrays`` uses ``P = max_agents + 1``:
  row ``max_agents`` is an *overflow* row that is non-empty iff the plan names an agent
  ``>= max_agents``, so such a plan still fails ``agent_count`` (and nothing else).

The parser never guesses: anything inside an agent line that is not a cell or a separator,
a duplicate label, an empty path, non-integer coordinates or a malformed JSON value make the
plan unparsable, and every such problem is listed in ``ParseReport.errors``.

Verification
------------
``verify_plan(level, cells, length, parsed_ok, cost=...)`` is pure JAX (jit and vmap it; see
``verify_batch``). It returns the paper's eight checks (order ``CHECKS``, the same as
``jaxenv.mapf.reference.CHECKS``), ``valid``, makespan and sum of costs (each agent's cost is
its *last* arrival at its goal; -1 unless valid), whether the chosen cost is optimal, and the
paper's accuracy reward. The per-step rules (bounds, holes, vertex and edge conflicts) come
from ``jaxenv.mapf.rules.violations`` and one-cell moves from ``rules.DELTAS``: one rules
implementation for stepwise play and whole plans.

Semantics of the array form: row ``i < n_agents`` with ``length[i] > 0`` is agent i's path
(a *used* row); ``agent_count`` holds iff exactly the rows ``0..n_agents-1`` are non-empty;
the other checks look at the used rows only (as the reference does with the first
``min(len(plan), n_agents)`` paths). An unparsable plan (``parsed_ok`` False, or some
``length > T``) fails every check.

Known limit (inherited from ``rules``): conflicts are found on cell ids of the padded grid plus
a one-cell ring, so two *different* cells both two or more cells outside the padded array can
be reported as a vertex/edge conflict. Such a plan already fails ``in_bounds``; ``valid``,
costs and reward are unaffected.

Default cost: **makespan**. The paper's case study names makespan as the cost its optimality
and reward use (as far as our notes go: /work/shared/paper.md marks it inferred); it is also
the number of joint steps until every agent is home, i.e. what the stepwise environment's
episode length measures and what a reader of a plan sees first. Sum of costs is available
with ``cost="soc"``. Both costs are always computed; only the reward and the ``optimal`` flag
depend on the choice. The held-out set's stored plan is SoC-optimal (CBS): it earns 1 under
``cost="soc"`` and, under the default, only where it is also makespan-optimal (86 % of the
3,150 instances).

Speed: on CPU the verifier is bound by ``rules.violations`` (a scatter-based conflict check
that vectorises poorly over a batch); ``verify_batch`` therefore maps over plans on CPU and
vectorises on accelerators (``mode``). See benchmarks/verify_throughput.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxenv.mapf import rules
from jaxenv.mapf.level import Level

Cell = tuple[int, int]

CHECKS = (
    "parsable",
    "one_cell_moves",
    "conflict_free",
    "goals_reached",
    "starts_correct",
    "agent_count",
    "no_hole",
    "in_bounds",
)
COSTS = ("makespan", "soc")
_COORD_CLIP = 1 << 20

# ------------------------------------------------------------------------------------- text


def format_plan(paths: Mapping[int, Sequence[Cell]] | Sequence[Sequence[Cell]]) -> str:
    """The text form, one line per agent: ``A0: (0,0) -> (0,1)``."""
    items = paths.items() if isinstance(paths, Mapping) else enumerate(paths)
    lines = []
    for i, path in sorted(items):
        cells = " -> ".join(f"({int(r)},{int(c)})" for r, c in path)
        lines.append(f"A{int(i)}: {cells}")
    return "\n".join(lines)


@dataclass
class ParseReport:
    """What the parser read. ``ok`` iff ``errors`` is empty; ``paths`` holds what was read."""

    ok: bool
    paths: dict[int, list[Cell]]
    errors: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)  # non-empty prose lines (text form)
    form: str = "none"  # "text", "json" or "none"

    def as_list(self) -> list[list[Cell]] | None:
        """Paths in agent order 0..max index (missing agents as []), None if not ok."""
        if not self.ok:
            return None
        top = max(self.paths, default=-1)
        return [list(self.paths.get(i, [])) for i in range(top + 1)]

    def to_arrays(self, max_agents: int, horizon: int | None = None) -> Plan:
        """The array form (see ``plan_arrays``); an unparsable report gives parsed_ok False."""
        return plan_arrays(self.paths if self.ok else {}, max_agents, horizon,
                           parsed_ok=self.ok)


_LABEL = re.compile(
    r"""^\s*(?:[-*•]\s*)?(?:\*\*|`|")?\s*(?:agent\s*a?|a)\s*(\d+)\s*(?:\*\*|`|")?\s*[:=]\s*(.*)$""",
    re.IGNORECASE,
)
_CELL = re.compile(r"[(\[]\s*([-+]?\d+)\s*,\s*([-+]?\d+)\s*[)\]]")
_SEP = re.compile(r"->|→|=>|[,;\s\[\]()]")  # one token: a "[" may open the next cell
_FENCE = re.compile(r"```[a-zA-Z]*\s*\n?(.*?)```", re.DOTALL)


def _parse_body(body: str) -> tuple[list[Cell], str | None]:
    """Cells of one agent's path, or an error naming the first text that is not a cell."""
    s = body.strip()
    if s.endswith(".") and not s.endswith(".."):
        s = s[:-1]
    cells: list[Cell] = []
    i = 0
    while i < len(s):
        m = _CELL.match(s, i)
        if m:
            cells.append((int(m.group(1)), int(m.group(2))))
            i = m.end()
            continue
        m = _SEP.match(s, i)
        if m:
            i = m.end()
            continue
        return cells, f"could not read {s[i:i + 24]!r}"
    if not cells:
        return cells, "no cells"
    return cells, None


def _parse_lines(text: str) -> ParseReport:
    paths: dict[int, list[Cell]] = {}
    errors: list[str] = []
    ignored: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("```"):
            continue
        m = _LABEL.match(line)
        if not m:
            ignored.append(line)
            continue
        agent = int(m.group(1))
        cells, err = _parse_body(m.group(2))
        if err:
            errors.append(f"A{agent}: {err}")
        if agent in paths:
            errors.append(f"A{agent}: given twice")
            continue
        paths[agent] = cells
    if not paths and not errors:
        errors.append("no agent lines (expected e.g. 'A0: (0,0) -> (0,1)')")
    return ParseReport(ok=not errors, paths=paths, errors=errors, ignored=ignored, form="text")


def _json_key(key: str) -> int | None:
    m = re.fullmatch(r"\s*(?:agent[\s_]*a?|a)?\s*(\d+)\s*", str(key), re.IGNORECASE)
    return int(m.group(1)) if m else None


def _json_cell(x: Any) -> Cell | None:
    if isinstance(x, list | tuple) and len(x) == 2 and all(
            isinstance(v, int) and not isinstance(v, bool) for v in x):
        return (int(x[0]), int(x[1]))
    return None


def _json_path(agent: int, x: Any, errors: list[str]) -> list[Cell]:
    if isinstance(x, str):
        cells, err = _parse_body(x)
        if err:
            errors.append(f"A{agent}: {err}")
        return cells
    if not isinstance(x, list):
        errors.append(f"A{agent}: path must be a list of [row, col], got {type(x).__name__}")
        return []
    cells = []
    for k, c in enumerate(x):
        cell = _json_cell(c)
        if cell is None:
            errors.append(f"A{agent}: step {k} is not [row, col] integers: {c!r}"[:120])
            return cells
        cells.append(cell)
    if not cells:
        errors.append(f"A{agent}: no cells")
    return cells


def _parse_json(blob: str) -> ParseReport:
    errors: list[str] = []
    paths: dict[int, list[Cell]] = {}
    try:
        data = json.loads(blob)
    except json.JSONDecodeError as e:
        return ParseReport(False, {}, [f"invalid JSON: {e}"], form="json")
    if isinstance(data, dict) and len(data) == 1:
        (k, v), = data.items()
        if str(k).lower() in ("plan", "paths", "solution"):
            data = v
    if isinstance(data, dict):
        for k, v in data.items():
            agent = _json_key(k)
            if agent is None:
                errors.append(f"unknown key {k!r} (expected an agent label such as 'A0')")
                continue
            if agent in paths:
                errors.append(f"A{agent}: given twice")
                continue
            paths[agent] = _json_path(agent, v, errors)
    elif isinstance(data, list):
        for agent, v in enumerate(data):
            paths[agent] = _json_path(agent, v, errors)
    else:
        errors.append(f"JSON plan must be an object or a list, got {type(data).__name__}")
    if not paths and not errors:
        errors.append("empty plan")
    return ParseReport(ok=not errors, paths=paths, errors=errors, form="json")


def parse_plan(text: str) -> ParseReport:
    """Parse an LLM-style reply into per-agent paths; see the module docstring for the forms.

    The JSON form is used when the reply (after stripping) or its first ```json fence starts
    with ``{`` or ``[``; otherwise the text form. Never guesses: see ``ParseReport.errors``.
    """
    if not isinstance(text, str):
        return ParseReport(False, {}, [f"expected a string, got {type(text).__name__}"])
    stripped = text.strip()
    fence = _FENCE.search(text)
    if stripped[:1] in ("{", "["):
        return _parse_json(stripped)
    if fence and fence.group(1).strip()[:1] in ("{", "["):
        return _parse_json(fence.group(1).strip())
    return _parse_lines(text)


# ------------------------------------------------------------------------------------ arrays


@struct.dataclass
class Plan:
    """Array form of a plan: cells [P, T, 2] int32, length [P] int32, parsed_ok [] bool."""

    cells: jax.Array
    length: jax.Array
    parsed_ok: jax.Array


def plan_arrays(paths: Mapping[int, Sequence[Cell]] | Sequence[Sequence[Cell]] | None,
                max_agents: int, horizon: int | None = None, *, parsed_ok: bool = True) -> Plan:
    """Numpy-backed array form with ``P = max_agents + 1`` rows (the last is the overflow row).

    Coordinates are clipped to ±2**20 (far off the grid either way; keeps int32 differences
    exact). ``horizon`` (T) defaults to the longest path rounded up to a multiple of 8. A path
    longer than ``horizon`` cannot be represented: the plan gets ``parsed_ok = False`` (it is
    not truncated). A list ``paths`` maps position to agent index; an empty path is an absent
    agent (as in the text form, where it cannot be written).
    """
    if paths is None:
        paths, parsed_ok = {}, False
    items = dict(paths.items() if isinstance(paths, Mapping) else enumerate(paths))
    longest = max((len(p) for p in items.values()), default=1)
    t = horizon if horizon is not None else max(8, -(-longest // 8) * 8)
    cells = np.zeros((max_agents + 1, t, 2), np.int32)
    length = np.zeros(max_agents + 1, np.int32)
    ok = bool(parsed_ok)
    for i, path in items.items():
        if len(path) == 0:
            continue
        if len(path) > t:
            ok = False
            continue
        row = min(int(i), max_agents)
        if row == max_agents and length[row] > 0:
            continue
        arr = np.asarray(path, np.int64).reshape(-1, 2)
        cells[row, :len(arr)] = np.clip(arr, -_COORD_CLIP, _COORD_CLIP)
        cells[row, len(arr):] = cells[row, len(arr) - 1]
        length[row] = len(arr)
    return Plan(cells=cells, length=length, parsed_ok=np.bool_(ok))


def stack_plans(plans: Sequence[Plan]) -> Plan:
    """Batch plans of equal shape into one Plan with a leading axis (numpy)."""
    return Plan(cells=np.stack([p.cells for p in plans]),
                length=np.stack([p.length for p in plans]),
                parsed_ok=np.stack([p.parsed_ok for p in plans]))


# ---------------------------------------------------------------------------------- verifier


@struct.dataclass
class Verdict:
    """Result of ``verify_plan`` for one plan (add a leading axis when vmapped)."""

    checks: jax.Array  # [8] bool, order CHECKS
    valid: jax.Array  # [] bool: all eight checks pass
    makespan: jax.Array  # [] int32, -1 unless valid
    soc: jax.Array  # [] int32, -1 unless valid
    cost: jax.Array  # [] int32: the chosen cost (makespan or soc), -1 unless valid
    optimal: jax.Array  # [] bool: valid and cost == the level's optimum (False if unknown)
    reward: jax.Array  # [] float32: the paper's accuracy reward (NaN if optimum unknown)
    first_conflict: jax.Array  # [] int32: first time with a vertex/edge conflict, -1 if none

    def check(self, name: str) -> jax.Array:
        return self.checks[..., CHECKS.index(name)]


def accuracy_reward(valid: jax.Array, cost: jax.Array, optimal: jax.Array) -> jax.Array:
    """Paper's reward: 0 if invalid; c = cost - optimal, c_max = 2 optimal; 1 if c <= 0,
    1 - 0.7 c / c_max if 0 < c <= c_max, 0.3 beyond (optimal 0: 1 if cost 0 else 0.3).
    NaN where ``optimal`` is unknown (< 0)."""
    c = (cost - optimal).astype(jnp.float32)
    c_max = (2 * optimal).astype(jnp.float32)
    graded = jnp.where(c <= 0, 1.0, jnp.where(c <= c_max, 1.0 - 0.7 * c / jnp.maximum(c_max, 1.0),
                                               0.3))
    r = jnp.where(valid, graded, 0.0)
    return jnp.where(optimal < 0, jnp.nan, r).astype(jnp.float32)


def verify_plan(level: Level, plan_cells: jax.Array, plan_len: jax.Array, parsed_ok: jax.Array,
                cost: str = "makespan", optimal: jax.Array | None = None) -> Verdict:
    """The eight whole-plan checks, costs and accuracy reward of one plan (pure JAX).

    level: an unbatched ``Level``; plan_cells [P, T, 2] int, plan_len [P] int, parsed_ok bool
    (see the module docstring for the array form). ``cost`` ("makespan" default, or "soc")
    picks the cost the reward and ``optimal`` use; ``optimal`` overrides the level's stored
    optimum of that cost. Jittable (``cost`` static) and vmappable.
    """
    if cost not in COSTS:
        raise ValueError(f"cost must be one of {COSTS}, got {cost!r}")
    cells = jnp.asarray(plan_cells, jnp.int32)
    length = jnp.asarray(plan_len, jnp.int32)
    p, t = cells.shape[0], cells.shape[1]
    n = level.n_agents
    row = jnp.arange(p)
    present = length > 0
    agent_count = jnp.all(jnp.where(row < n, present, ~present)) & (n <= p)
    parsed = jnp.asarray(parsed_ok, bool) & jnp.all(length <= t)

    # Only rows below the level's capacity can be agents; the rest only count for agent_count.
    a = min(p, level.max_agents)
    cells, length = cells[:a], length[:a]
    used = (length > 0) & (jnp.arange(a) < n)

    # Padded paths: cell at time k is cells[min(k, len - 1)].
    k = jnp.arange(t)
    last = jnp.take_along_axis(cells, jnp.clip(length - 1, 0, t - 1)[:, None, None], axis=1)
    path = jnp.where(k[None, :, None] < length[:, None, None], cells, last)  # [a, T, 2]
    prev = jnp.concatenate([path[:, :1], path[:, :-1]], axis=1)

    # The per-step rules; the first "step" (prev = path[0]) checks the start cells themselves.
    v = jax.vmap(lambda x, y: rules.violations(level.holes, level.size, x, y, used),
                 in_axes=(1, 1))(prev, path)  # fields [T, a]
    delta = path - prev
    legal = jnp.any(jnp.all(delta[..., None, :] == rules.DELTAS, -1), -1)  # [a, T]
    one_cell_moves = jnp.all(legal | ~used[:, None])
    clash = jnp.any(v.vertex | v.edge, axis=1)  # [T]
    conflict_free = ~jnp.any(clash)
    no_hole = ~jnp.any(v.hole)
    in_bounds = ~jnp.any(v.oob)

    starts, goals = level.starts[:a], level.goals[:a]
    starts_correct = jnp.all(jnp.all(path[:, 0] == starts, -1) | ~used)
    goals_reached = jnp.all(jnp.all(path[:, -1] == goals, -1) | ~used)

    checks = jnp.stack([jnp.bool_(True), one_cell_moves, conflict_free, goals_reached,
                        starts_correct, agent_count, no_hole, in_bounds]) & parsed
    valid = jnp.all(checks)

    away = jnp.any(path != goals[:, None, :], -1)  # [P, T]
    arrival = jnp.max(jnp.where(away, k[None, :] + 1, 0), axis=1)
    arrival = jnp.where(used, arrival, 0)
    makespan = jnp.where(valid, jnp.max(arrival), -1).astype(jnp.int32)
    soc = jnp.where(valid, jnp.sum(arrival), -1).astype(jnp.int32)
    chosen = makespan if cost == "makespan" else soc
    opt = (level.opt_makespan if cost == "makespan" else level.opt_soc) if optimal is None \
        else jnp.asarray(optimal, jnp.int32)
    first = jnp.where(jnp.any(clash), jnp.argmax(clash), -1).astype(jnp.int32)
    return Verdict(
        checks=checks, valid=valid, makespan=makespan, soc=soc, cost=chosen,
        optimal=valid & (opt >= 0) & (chosen == opt),
        reward=accuracy_reward(valid, chosen, opt),
        first_conflict=jnp.where(parsed, first, -1),
    )


@partial(jax.jit, static_argnames=("cost", "mode"))
def verify_batch(levels: Level, plan_cells: jax.Array, plan_len: jax.Array,
                 parsed_ok: jax.Array, cost: str = "makespan", mode: str = "vmap") -> Verdict:
    """``verify_plan`` over a batch: levels [B] (batched pytree), cells [B, P, T, 2], ...

    ``mode``: ``"vmap"`` (default) vectorises over the batch; ``"map"`` runs the plans one
    after another (``lax.map``) with each plan's time steps vectorised, which needs less memory
    for very large batches. Results are identical (tested);
    ``benchmarks/verify_throughput.py`` times both.
    """
    if mode == "vmap":
        return jax.vmap(partial(verify_plan, cost=cost))(levels, plan_cells, plan_len, parsed_ok)
    if mode == "map":
        return jax.lax.map(lambda x: verify_plan(*x, cost=cost),
                           (levels, plan_cells, plan_len, parsed_ok))
    raise ValueError(f"mode must be 'vmap' or 'map', got {mode!r}")


verify_one = jax.jit(verify_plan, static_argnames=("cost",))
"""``verify_plan`` under ``jax.jit`` (one plan, one level)."""


def verify_text(level: Level, text: str, cost: str = "makespan",
                horizon: int | None = None) -> tuple[Verdict, ParseReport]:
    """Parse one reply and verify it against one (unbatched) level (jitted per shape)."""
    report = parse_plan(text)
    plan = report.to_arrays(level.max_agents, horizon)
    return verify_one(level, plan.cells, plan.length, plan.parsed_ok, cost=cost), report
