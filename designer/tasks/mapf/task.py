"""MAPF-FrozenLake as a `Task`: the paper's testbed (jaxenv.mapf) seen by the loop."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from designer.tasks.base import CauseRule, Curriculum, Task
from designer.tasks.mapf.failures import mapf_failures
from jaxenv.mapf import Capacity, MAPFFrozenLake
from jaxenv.mapf.benchmark import format_markdown
from jaxenv.mapf.benchmark.heldout import AGENT_SIZES
from jaxenv.mapf.benchmark.validator import load_validator

HELDOUT_AGENTS = tuple(str(a) for a in AGENT_SIZES)
HELDOUT_SIZES = tuple(str(n) for n in sorted({n for s in AGENT_SIZES.values() for n in s}))

# The hand-written curriculum (the `rules` engineer, the LLM's fallback): training success
# high -> larger maps and more holes; low -> smaller maps, fewer holes; in between map-size
# weight follows the validation failures; conflicts over 30 % of failures -> more levels that
# need waits (they teach yielding).
CURRICULUM = Curriculum(
    harder={"size_weights": +1, "hole_ratio": +0.05}, follow="size_weights",
    rules=(CauseRule(("vertex", "edge"), 0.3, "wait_ratio", +0.10,
                     "conflicts are over 30% of failures: more levels that need waits"),),
    what="larger maps, more holes", easier="smaller maps, fewer holes")

PROMPTS = Path(__file__).parents[2] / "prompts"  # the engineer's shipped texts


def headline(table: dict[str, Any]) -> dict[str, float]:
    """valid % and optimal % over the whole split (the paper's two numbers)."""
    o = table["overall"]
    return {"valid": float(o["valid"]), "optimal": float(o["optimal"])}


def score(table: dict[str, Any]) -> float:
    """Model selection's number: valid % + optimal % over the whole split (both of the paper's
    numbers count, as both count in its accuracy reward)."""
    h = headline(table)
    return h["valid"] + h["optimal"]


def mapf_task(settings: Any) -> Task:
    """The MAPF task of a `RunSettings` (capacity, preset, pinned rules and rewards)."""
    from designer.engineer.edits import preset_space

    env = MAPFFrozenLake(settings.capacity.build(Capacity))
    space = preset_space(env.config_space, settings.preset)
    space = space.with_editable(space.editable_names(), pin=settings.task.pins())
    # the frozen splits are seen as the trainee sees them (all but the training-only shapes)
    validator = load_validator("validation", seen=env.cap)
    heldout = load_validator("heldout", seen=env.cap)
    # Validation and held-out levels are played under the run's own rules and rewards.
    vspace = validator.env.config_space
    eval_cfg = vspace.to_config(dict(vspace.default(), **settings.task.pins()))
    return Task(name="mapf", env=env, space=space, validator=validator, heldout=heldout,
                eval_cfg=eval_cfg,
                failures=lambda val, train, seed: mapf_failures(val, train, seed=seed),
                headline=headline, markdown=format_markdown,
                guidelines=PROMPTS / "guidelines.md", curriculum=CURRICULUM, score=score,
                targets={"size_weights": HELDOUT_SIZES, "agent_weights": HELDOUT_AGENTS},
                describe="MAPF-FrozenLake: multi-agent path finding on grids with holes")
