"""Stage data for the LLM trainee: levels from the generator config, the paper's prompt, labels.

The paper trains on 2-agent instances drawn from its generator; here a stage is
``generate_batch(key, cfg, cap, n)`` from a ``MAPFConfig`` (the same config space the engineers
edit), each level rendered into the whole-plan prompt (``designer.tasks.mapf.plans.prompt``,
the wording `envengineer eval --llm` asks in too) that asks for the plan in the text form of
docs/plan_format.md. Each level also gets one exact plan (``jaxenv.mapf.solvers.cbs.solve``,
SoC-optimal) for the SFT warm start.

Presets (``PRESETS``): ``cpu`` (2 agents on 3x3 and 4x4, few holes, a handful of instances per
round, group 4), ``cpu_easy`` (its easiest stage: 3x3, no holes) and ``paper`` (2 agents on
3x3 ... 10x10, 4,000 instances per round, group 8).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import jax
import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from designer.tasks.mapf.plans.prompt import plan_messages
from designer.tasks.mapf.plans.reward import RewardConfig, plan_reward
from jaxenv.mapf.config import Capacity, MAPFConfig, make_config_space
from jaxenv.mapf.generator import generate_batch
from jaxenv.mapf.level import Level
from jaxenv.mapf.plans.parse import format_plan
from jaxenv.mapf.solvers.cbs import solve


class StagePreset(BaseModel):
    """What one stage of LLM training draws (a preset of the generator config)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_size: int = Field(4, ge=3, le=10, description="Largest map side N (maps 3..N).")
    sizes: tuple[int, ...] = Field((3, 4), description="Map sizes drawn, in equal shares "
                                   "(each in 3..max_size).")
    hole_ratio: float = Field(0.1, ge=0.0, le=0.6, description="Share of cells that are holes.")
    wait_ratio: float = Field(0.0, ge=0.0, le=1.0,
                              description="Share of levels whose optimal plan needs a wait.")
    n_agents: int = Field(2, ge=1, le=5, description="Agents per level (the paper: 2).")
    instances: int = Field(16, ge=1, le=100_000, description="Instances per round.")
    group: int = Field(4, ge=2, le=64, description="GRPO samples per prompt.")
    max_new_tokens: int = Field(96, ge=4, le=8192, description="Reply length cap (tokens).")
    max_prompt_tokens: int = Field(320, ge=16, le=32_768, description="Prompt length cap.")

    def model_post_init(self, _):
        if not self.sizes or any(not 3 <= s <= self.max_size for s in self.sizes):
            raise ValueError(f"sizes must lie in 3..{self.max_size}, got {self.sizes}")


PRESETS: dict[str, StagePreset] = {
    "cpu": StagePreset(),
    # The CPU preset's easiest stage: 3x3, no holes, no waits needed (the benchmark's run).
    "cpu_easy": StagePreset(max_size=3, sizes=(3,), hole_ratio=0.0, max_new_tokens=64),
    "paper": StagePreset(max_size=10, sizes=tuple(range(3, 11)), hole_ratio=0.2, wait_ratio=0.3,
                         instances=4000, group=8, max_new_tokens=1024, max_prompt_tokens=1024),
}


def capacity(p: StagePreset) -> Capacity:
    return Capacity(max_size=p.max_size, max_agents=p.n_agents, max_steps=64)


def config(p: StagePreset) -> MAPFConfig:
    """The generator config of a preset (through the engineers' config space)."""
    space = make_config_space(max_size=p.max_size, max_agents=p.n_agents)
    v = space.default()
    keys = [str(n) for n in range(3, p.max_size + 1)]
    v["size_weights"] = [1.0 / len(p.sizes) if int(k) in p.sizes else 0.0 for k in keys]
    v["hole_ratio"] = [p.hole_ratio] * len(keys)
    v["wait_ratio"] = [p.wait_ratio] * len(keys)
    v["agent_weights"] = [1.0 if k == p.n_agents else 0.0 for k in range(1, p.n_agents + 1)]
    return space.to_config(v)


def index(levels: Level, i: int) -> Level:
    return jax.tree.map(lambda x: x[i], levels)


def optimal_plan(level: Level) -> str:
    """One exact (SoC-optimal) plan of a level in the text form."""
    n, k = int(level.size), int(level.n_agents)
    holes = np.asarray(level.holes)[:n, :n]
    starts = [tuple(int(x) for x in c) for c in np.asarray(level.starts)[:k]]
    goals = [tuple(int(x) for x in c) for c in np.asarray(level.goals)[:k]]
    sol = solve(holes, starts, goals, time_limit=10.0)
    if sol is None:
        raise ValueError("the generator drew an unsolvable level")
    return format_plan(sol.paths)


@dataclass
class Stage:
    """One round's data: levels [B], their chat messages, one optimal plan each and the
    paper's reward constants (a `policy.llm.stage.Stage`)."""

    levels: Level
    messages: list[list[dict[str, str]]]
    answers: list[str]
    reward_config: RewardConfig = field(default_factory=RewardConfig)

    def reward(self, idx: np.ndarray, completions: list[str], n_tokens: list[int],
               progress: float) -> dict[str, np.ndarray]:
        """The paper's reward of each completion against level `idx[i]`."""
        return plan_reward(index_many(self.levels, idx), completions, n_tokens, progress,
                           self.reward_config)


def draw(key: jax.Array, p: StagePreset, n: int | None = None) -> Stage:
    """``n`` (default ``p.instances``) levels of a preset, rendered and labelled."""
    n = p.instances if n is None else n
    levels = generate_batch(key, config(p), capacity(p), n)
    one = [index(levels, i) for i in range(n)]
    return Stage(levels=levels, messages=[plan_messages(lv) for lv in one],
                 answers=[optimal_plan(lv) for lv in one])


def index_many(levels: Level, idx: np.ndarray) -> Level:
    """Levels [len(idx)] picked from a batch."""
    return jax.tree.map(lambda x: np.asarray(x)[idx], levels)
