"""The multi-agent view of an environment: what a trainee needs, whatever the task.

Every jaxenv environment is multi-agent in shape: actions are `[A]` ints, rewards `[A]` floats,
and `agent_obs(obs, state)` gives each agent slot its network input (`AgentObs`) with masks.
A single-agent gymnax environment becomes the `A = 1` case through `jaxenv.wrappers.SingleAgent`,
so one trainer (`policy.make_train`) serves MAPF-FrozenLake, CartPole and what comes next.

The protocol (`MultiAgentEnv`) is small on purpose:

- `num_agents`, `num_actions`, `horizon` (static ints: agent slots, discrete actions per agent,
  the longest episode, which sizes recorded trajectories); optionally `action_dim` (> 0: actions
  are continuous float vectors of that size, `[A, action_dim]`; absent or 0: discrete);
- `agent_obs(obs, state, with_global=False) -> AgentObs` (unbatched; vmap it);
- `outcomes` (names of the ways an episode ends; index 0 is the task's success or normal end)
  and `outcome(info, terminated, truncated) -> [] int32` (which one this ending was);
- optionally `prepare_levels(levels)` (a batch of stored levels in the env's own form, e.g.
  MAPF adds the distance fields its cost-to-go observation reads; `policy.evaluate` calls it);
- `episode_metrics(state) -> dict[str, []]` (per-episode numbers read at the end, e.g. MAPF's
  valid/optimal/makespan) and `trace(state)` (what a recorded trajectory keeps per time step).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import jax
from flax import struct


@struct.dataclass
class AgentObs:
    """Per-agent network input of one environment (leading batch dims allowed).

    vec: [..., A, F] float32 features; view: [..., A, V, V, C] local image or None;
    glob: [..., S, S, C] whole-board input for a centralised critic, or None (not built);
    agent_mask: [..., A] the slot holds an agent (value loss); acting: [..., A] its action has an
    effect this step (policy loss and entropy; e.g. a MAPF agent frozen on its goal does not act);
    pos: [..., A, 2] float32 the agent's position scaled to [0, 1) (what a network that lets
    agents see each other uses to tell who is near), or None where positions mean nothing;
    action_mask: [..., A, num_actions] bool, False where the rules make an action pointless
    (e.g. a move off the grid), or None (every action allowed). Masking never hides a failure
    the engineer needs to see: the environment decides which actions are pointless.
    """

    vec: jax.Array
    agent_mask: jax.Array
    acting: jax.Array
    view: jax.Array | None = None
    glob: jax.Array | None = None
    pos: jax.Array | None = None
    action_mask: jax.Array | None = None


@runtime_checkable
class MultiAgentEnv(Protocol):
    """What `policy` needs from an environment (see the module docstring)."""

    num_agents: int
    horizon: int
    outcomes: tuple[str, ...]

    @property
    def num_actions(self) -> int: ...

    def agent_obs(self, obs: Any, state: Any, with_global: bool = False) -> AgentObs: ...

    def outcome(self, info: dict, terminated: jax.Array, truncated: jax.Array) -> jax.Array: ...

    def episode_metrics(self, state: Any) -> dict[str, jax.Array]: ...

    def trace(self, state: Any) -> Any: ...
