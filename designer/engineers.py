"""Engineers: whatever proposes the next stage's environment config, behind one interface.

`Engineer.propose(context) -> list[Proposal]`: candidates, best first, each a full set of
valid values of the environment's `ConfigSpace`. Every engineer (fixed, domain randomisation,
learnability sampling, random mutation, rules, an LLM) answers the same call with the same
budget, so a comparison between them is fair.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class Proposal:
    """One candidate config: full, valid values of the space, and where they came from."""

    values: dict[str, Any]
    rationale: str = ""
    source: str = ""  # the engineer (and backend) that wrote it
    log_ids: tuple[str, ...] = ()  # LLM call-log records behind it
    adjustments: tuple[dict, ...] = field(default=())  # what projection changed, with reasons


@runtime_checkable
class Engineer(Protocol):
    """Proposes the next stage's config from what the loop shows it (`context`)."""

    name: str

    def propose(self, context: Any) -> list[Proposal]: ...


class FixedEngineer:
    """The paper's baseline: the first config, kept for every stage."""

    name = "fixed"

    def propose(self, context: Any) -> list[Proposal]:
        return [Proposal(values=dict(context.current), rationale="fixed config",
                         source=self.name)]
