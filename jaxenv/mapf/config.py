"""MAPF-FrozenLake configuration: the dynamic config pytree and its knob space.

`MAPFConfig` is *dynamic*: a batch of configs is a pytree with a leading axis, and changing any
value never recompiles. `Capacity` (largest grid, most agents, view radius, step cap) is
static: it is fixed on the environment object, and changing it recompiles.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jax
from flax import struct

from jaxenv.config_space import ConfigSpace, Knob

MIN_SIZE = 3
CONFLICT_MODES = ("fail", "block")
FAIL, BLOCK = 0, 1
# What an agent on its goal may do (docs/rules.md "Goal rule"): `plan` (default) keeps it
# moving, so an episode is exactly a whole plan the verifier reads; `freeze` fixes it there.
GOAL_RULES = ("plan", "freeze")
PLAN, FREEZE = 0, 1


@struct.dataclass
class MAPFConfig:
    """Generator and rule parameters of one environment (arrays only).

    Vector fields are indexed by map size (`size_weights[i]` is size `MIN_SIZE + i`) or by
    agent count (`agent_weights[k]` is `k + 1` agents).
    """

    size_weights: jax.Array  # [n_sizes] simplex
    hole_ratio: jax.Array  # [n_sizes] share of cells that are holes
    wait_ratio: jax.Array  # [n_sizes] share of levels whose optimal solution needs a wait
    agent_weights: jax.Array  # [max_agents] simplex over 1..max_agents agents
    slip_prob: jax.Array  # [] chance that a move slips to a perpendicular direction
    step_limit_factor: jax.Array  # [] episode limit multiplier
    conflict_mode: jax.Array  # [] int32: 0 fail, 1 block
    goal_rule: jax.Array  # [] int32: 0 plan (agents keep moving), 1 freeze at the goal
    success_reward: jax.Array  # []
    step_cost: jax.Array  # []
    shaping: jax.Array  # []
    conflict_penalty: jax.Array  # []
    soc_cost: jax.Array  # [] weight of the verifier's sum-of-costs term in the reward
    makespan_cost: jax.Array  # [] weight of the verifier's makespan term in the reward


def size_keys(max_size: int) -> tuple[str, ...]:
    return tuple(str(n) for n in range(MIN_SIZE, max_size + 1))


def make_config_space(max_size: int = 10, max_agents: int = 5,
                      label_waits: bool = True) -> ConfigSpace:
    """The knob space of MAPF-FrozenLake for a given static capacity.

    Defaults follow the paper where it speaks: sizes 3-10 in equal shares, 2 agents,
    deterministic moves, a violation ends the episode. Without `label_waits` the generator
    cannot tell which levels need a wait, so `wait_ratio` has no effect and is not editable.
    """
    if max_size < MIN_SIZE:
        raise ValueError(f"max_size must be >= {MIN_SIZE}")
    if max_agents < 1:
        raise ValueError("max_agents must be >= 1")
    sizes = size_keys(max_size)
    paper_sizes = [s for s in sizes if int(s) <= 10]
    size_w = [1.0 / len(paper_sizes) if s in paper_sizes else 0.0 for s in sizes]
    agent_keys = tuple(str(k) for k in range(1, max_agents + 1))
    agent_w = [1.0 if k == min(2, max_agents) else 0.0 for k in range(1, max_agents + 1)]
    n = len(sizes)
    knobs = [
        Knob(name="size_weights", kind="simplex", keys=sizes, default=size_w,
             description="Share of training levels of each map size (N for an NxN grid)."),
        Knob(name="hole_ratio", kind="float", keys=sizes, low=0.0, high=0.6, step=0.05,
             default=[0.2] * n,
             description="Per map size, the share of cells that are holes."),
        Knob(name="wait_ratio", kind="float", keys=sizes, low=0.0, high=1.0, step=0.05,
             default=[0.3] * n,
             editable=label_waits,
             description="Per map size, the share of levels whose optimal joint plan needs an "
                         "agent to wait (exact for 2 agents, see jaxenv.mapf.joint)."
                         + ("" if label_waits else " Ignored: this capacity does not label "
                            "waits (Capacity.label_waits=False).")),
        Knob(name="agent_weights", kind="simplex", keys=agent_keys, default=agent_w,
             description="Share of training levels with each number of agents."),
        Knob(name="slip_prob", kind="float", low=0.0, high=0.5, step=0.05, default=0.0,
             description="Chance that a move slips to a perpendicular direction (0: the "
                         "paper's deterministic lake)."),
        Knob(name="step_limit_factor", kind="float", low=1.0, high=4.0, step=0.25, default=2.0,
             description="Episode limit = factor * (longest single-agent path + N)."),
        Knob(name="conflict_mode", kind="choice", choices=CONFLICT_MODES, default="fail",
             editable=False,
             description="fail: the first violation ends the episode; block: conflicting moves "
                         "are cancelled and penalised (POGEMA-like)."),
        Knob(name="goal_rule", kind="choice", choices=GOAL_RULES, default="plan",
             editable=False,
             description="plan: an agent on its goal keeps acting and may leave and come back; "
                         "the episode succeeds at the first step with every agent on its goal "
                         "and is exactly the whole plan the verifier checks. freeze: an agent "
                         "that reaches its goal stays there (older, stricter stepwise rule)."),
        Knob(name="success_reward", kind="float", low=0.0, high=10.0, step=0.5, default=1.0,
             editable=False, description="Team reward when every agent is on its goal."),
        Knob(name="step_cost", kind="float", low=0.0, high=1.0, step=0.01, default=0.0,
             editable=False, description="Cost per step for each agent not yet at its goal."),
        Knob(name="shaping", kind="float", low=0.0, high=1.0, step=0.01, default=0.0,
             editable=False,
             description="Reward per unit of Manhattan distance to goal gained (potential)."),
        Knob(name="conflict_penalty", kind="float", low=0.0, high=10.0, step=0.05, default=0.0,
             editable=False,
             description="Penalty for an agent that violates a rule (fail) or is blocked."),
        Knob(name="soc_cost", kind="float", low=0.0, high=1.0, step=0.01, default=0.0,
             editable=False,
             description="Weight of the verifier's sum of costs: on success each agent pays its "
                         "own cost (its last arrival time at its goal)."),
        Knob(name="makespan_cost", kind="float", low=0.0, high=1.0, step=0.01, default=0.0,
             editable=False,
             description="Weight of the verifier's makespan: on success every agent pays the "
                         "team's makespan."),
    ]
    return ConfigSpace(knobs, _build)


def _build(enc: Mapping[str, Any]) -> MAPFConfig:
    return MAPFConfig(**enc)


@dataclass(frozen=True)
class Capacity:
    """Static capacity of an environment: shapes and loop bounds. Changing it recompiles.

    label_waits: compute the exact two-agent needs-wait label and optimal costs at generation
    (joint BFS over max_size**4 pairs; turn off for large boards where it is too costly, then
    `wait_ratio` is ignored and labels are UNKNOWN).
    cost_to_go: every agent also observes its shortest-path distance to its goal and which of
    its four moves shorten it (`MAPFObs.cost_to_go`); the distances are computed once per level
    (a BFS per agent, stored in `Level.dist`), so a step only reads five cells per agent.
    priority: every agent also observes which agents in its view rank above it
    (`MAPFObs.priority`: the active agents of a lower slot index). With one set of weights and
    symmetric local views, two agents that contend for a cell see the same situation and
    decide alike; a fixed order lets them learn the tie-break of prioritised planning (the
    lower rank yields).
    intent: every agent also observes where the other agents in its view are headed: the cell
    each would enter by its first move that shortens its distance to its goal (`MAPFObs.intent`;
    needs `cost_to_go`, whose distances it reads), so a conflict shows one step before it
    happens.
    static_rows: every level also carries its obstacle and goal planes bit-packed
    (`Level.rows`), so `packed_views` packs only the agents' plane per step (max_size <= 32).
    """

    max_size: int = 10
    max_agents: int = 5
    view_radius: int = 3
    max_steps: int = 128
    label_waits: bool = True
    cost_to_go: bool = False
    priority: bool = False
    intent: bool = False
    static_rows: bool = False

    def __post_init__(self):
        if self.max_size < MIN_SIZE:
            raise ValueError(f"max_size must be >= {MIN_SIZE}")
        if self.max_agents < 1 or self.view_radius < 0 or self.max_steps < 1:
            raise ValueError(f"invalid capacity {self}")
        if self.label_waits and self.max_size > 32:
            raise ValueError("label_waits needs max_size <= 32")
        if self.intent and not self.cost_to_go:
            raise ValueError("intent reads the cost-to-go's distances: set cost_to_go too")
        if self.static_rows and self.max_size > 32:
            raise ValueError("static_rows needs max_size <= 32 (a map row in a word)")

    @property
    def n_sizes(self) -> int:
        return self.max_size - MIN_SIZE + 1
