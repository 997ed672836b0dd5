"""Text rendering of MAPF-FrozenLake levels and states, in the style of the paper's prompts.

``render_text(level)`` shows the grid with the agents at their starts; ``render_text(state)``
(a ``MAPFState``) shows them where they are now, with the time step and who is done. The grid
(``.`` ice, ``H`` hole, ``Ai`` agent i, ``Gi`` goal of agent i, several on one cell joined by
``+``) is followed by one line per agent with explicit ``(row, col)`` coordinates, row 0 at the
top, so a reader (person or LLM) never has to count columns. An example: docs/rules.md.
"""

from __future__ import annotations

import numpy as np

from jaxenv.mapf.env import MAPFState
from jaxenv.mapf.level import Level

LEGEND = "Legend: . ice, H hole, Ai agent i, Gi goal of agent i."


def _cells(level: Level, pos: np.ndarray) -> list[list[str]]:
    n = int(level.size)
    k = int(level.n_agents)
    holes = np.asarray(level.holes)
    goals = np.asarray(level.goals)
    grid = [[["H"] if holes[r, c] else [] for c in range(n)] for r in range(n)]
    for i in range(k):
        r, c = (int(x) for x in pos[i])
        if 0 <= r < n and 0 <= c < n:
            grid[r][c].append(f"A{i}")
    for i in range(k):
        r, c = (int(x) for x in goals[i])
        if 0 <= r < n and 0 <= c < n:
            grid[r][c].append(f"G{i}")
    return [["+".join(t) if t else "." for t in row] for row in grid]


def _grid_text(cells: list[list[str]]) -> list[str]:
    n = len(cells)
    width = max([len(f"c{n - 1}")] + [len(t) for row in cells for t in row])
    pad = len(f"r{n - 1}") + 2
    head = " " * pad + " ".join(f"c{c}".ljust(width) for c in range(n))
    lines = [head.rstrip()]
    for r, row in enumerate(cells):
        lines.append((f"r{r}".ljust(pad) + " ".join(t.ljust(width) for t in row)).rstrip())
    return lines


def render_text(x: Level | MAPFState, *, legend: bool = True) -> str:
    """The grid, holes, agents and goals as text (see the module docstring for the legend).

    Accepts one unbatched ``Level`` or ``MAPFState``.
    """
    if isinstance(x, MAPFState):
        level, pos, state = x.level, np.asarray(x.pos), x
    elif isinstance(x, Level):
        level, pos, state = x, np.asarray(x.starts), None
    else:
        raise TypeError(f"render_text takes a Level or a MAPFState, got {type(x).__name__}")
    if np.ndim(level.size) != 0:
        raise ValueError("render_text takes one level, not a batch (index it first)")
    n, k = int(level.size), int(level.n_agents)
    goals = np.asarray(level.goals)
    starts = np.asarray(level.starts)
    plural = "agent" if k == 1 else "agents"
    head = f"Grid {n}x{n}, {k} {plural}."
    if legend:
        head += " Cells are (row, col); row 0 is the top row, col 0 the left column."
    lines = [head]
    if state is not None:
        status = "success" if bool(state.success) else "failed" if bool(state.failed) else "running"
        lines.append(f"Time step {int(state.time)}, {status}.")
    if legend:
        lines.append(LEGEND)
    lines += _grid_text(_cells(level, pos))
    lines.append("Agents:")
    frozen = np.asarray(state.frozen) if state is not None else None  # freeze rule only
    for i in range(k):
        g = f"goal ({goals[i, 0]},{goals[i, 1]})"
        if state is None:
            lines.append(f"A{i}: start ({starts[i, 0]},{starts[i, 1]}), {g}")
        else:
            done = ", done" if frozen[i] else ", on its goal" if (pos[i] == goals[i]).all() else ""
            lines.append(f"A{i}: at ({pos[i, 0]},{pos[i, 1]}), {g}{done}")
    return "\n".join(lines)
