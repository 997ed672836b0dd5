"""The trainee's task as an LLM sees it: one MAPF-FrozenLake instance, all plans in one reply.

The paper gives its trainee the grid (holes, agents A0, A1, ... and goals G0, G1, ...) and
asks for every agent's whole plan in one reply; waiting is allowed; a plan is valid when it
passes the eight checks (parsable, one-cell moves, no vertex or edge conflict, goals reached,
starts correct, agent count, no hole, in bounds) and optimal at the optimal cost
(/work/shared/paper.md "MAPF-FrozenLake"). The paper does not publish its prompt's wording, so
`plan_messages` states exactly those rules, shows the grid with `jaxenv.mapf.render.
render_text` and asks for the text form of docs/plan_format.md that
`jaxenv.mapf.plans.parse_plan` reads. One wording serves the LLM trainee's GRPO, its
validation and verification, and `envengineer eval --llm`, so a trainee is scored on the
prompt it learnt from; it is short so that the CPU preset's prompts fit the trainee's
prompt-length caps. `PROMPT_VERSION` names this wording: answers written under another
wording are never mixed with these (the answer log checks it).

Constrained mode (`constrained=True`): the reply must be the JSON form
``{"A0": [[r, c], ...], ...}``, and `plan_schema(n_agents, size)` is its JSON schema (exactly
the instance's agents as keys, each a non-empty list of on-grid cells), which the
grammar-constrained backends (transformers, llama.cpp, vLLM) enforce while decoding and the
OpenAI-compatible backend passes as `response_format`. The schema binds the form, not the
plan: a constrained reply can still collide, step into a hole or miss its goal.
"""

from __future__ import annotations

from typing import Any

from jaxenv.mapf.level import Level
from jaxenv.mapf.render import render_text

PROMPT_VERSION = "plan-v2"
MAX_PATH_FACTOR = 4  # cells per path in the constrained form, per unit of map side
MODES = ("text", "json")  # free text (the paper's) or JSON-schema constrained

# The paper's rules in a few lines, so that the prompts of the LLM trainee's CPU preset fit its
# prompt-length caps (llm.max_prompt_tokens in training, eval_max_prompt_tokens on a split).
RULES = ("You plan paths for agents on a frozen lake. Every agent moves at most one cell (up, "
         "down, left, right) or waits each time step; agents never share a cell or swap cells; "
         "nobody steps on a hole (H) or off the grid; every agent Ai ends on its goal Gi. A plan "
         "is optimal when the last agent arrives as early as possible.")
ANSWER = {"text": "Reply with one line per agent, its cells from its start to its goal, like\n"
                  "A0: (0,0) -> (0,1) -> (1,1)\nA1: (2,2) -> (2,2) -> (2,1)",
          "json": "Reply with one JSON object, one key per agent, its [row, col] cells from its "
                  "start to its goal, like\n"
                  '{"A0": [[0, 0], [0, 1], [1, 1]], "A1": [[2, 2], [2, 2], [2, 1]]}'}


def plan_messages(level: Level, mode: str = "text") -> list[dict[str, str]]:
    """The chat messages that ask for one unbatched level's whole plan (`mode`: one of
    `MODES`)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    return [{"role": "system", "content": f"{RULES} {ANSWER[mode]}"},
            {"role": "user", "content": render_text(level) + "\nWrite the plan."}]


def plan_schema(n_agents: int, size: int) -> dict[str, Any]:
    """The JSON schema of a plan for `n_agents` agents on a `size` x `size` grid.

    Coordinates are an `enum` of the grid's rows/columns (every constrained backend supports
    enums; not all support integer bounds). A path has at most `MAX_PATH_FACTOR` x `size`
    cells: every stored optimal plan of both frozen splits fits (tested), and without a bound
    a small model repeats its last cell until `max_tokens` cuts the reply.
    """
    if not (1 <= int(n_agents) <= 64 and 1 <= int(size) <= 64):
        raise ValueError(f"plan_schema: n_agents and size must be in 1..64, got "
                         f"{n_agents}, {size}")
    coord = {"type": "integer", "enum": list(range(int(size)))}
    cell = {"type": "array", "items": coord, "minItems": 2, "maxItems": 2}
    path = {"type": "array", "items": cell, "minItems": 1,
            "maxItems": MAX_PATH_FACTOR * int(size)}
    names = [f"A{i}" for i in range(int(n_agents))]
    return {"title": f"plan_{int(n_agents)}a_{int(size)}x{int(size)}", "type": "object",
            "properties": {n: path for n in names}, "required": names,
            "additionalProperties": False}
