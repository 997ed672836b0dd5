"""Reasoning roles of the LLM engineer: one call (`single`, the paper's) or a `team`.

- `single`: one prompt (F, G, H, T as configured), `n` sampled replies, each a JSON edit
  constrained by the edit schema;
- `team`: an **analyst** writes a short diagnosis from F and the trajectories; an **engineer**
  writes `n` candidate edits from the diagnosis with the rest of the context; a **critic**
  accepts, revises or rejects each candidate with a reason (e.g. it rejects an edit that drops
  the map sizes the evaluation uses, or one that makes every stage trivially easy). Every
  role's output is schema-constrained: the diagnosis a bounded printable string, the critic's
  verdict an enum with an optional revised edit.

Replies are data: parsed against the schema and applied with `designer.engineer.edits.apply_edit`
(constrained replies through `parse`, others through `project`), never executed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from designer.engineer.context import Context, ContextBuilder, editable_values
from designer.engineer.edits import apply_edit, edit_schema, text_schema

DIAGNOSIS_SCHEMA = {
    "type": "object", "properties": {"diagnosis": text_schema(300)},
    "required": ["diagnosis"], "additionalProperties": False,
}
VERDICTS = ("accept", "revise", "reject")


def critic_schema(space: Any) -> dict[str, Any]:
    return {"type": "object",
            "properties": {"verdict": {"type": "string", "enum": list(VERDICTS)},
                           "reason": text_schema(160),
                           "revised": edit_schema(space)},
            "required": ["verdict", "reason"], "additionalProperties": False}


@dataclass
class Draft:
    """One candidate as the roles produced it, with everything needed to audit it."""

    values: dict[str, Any] | None  # the applied config, None if the reply was unusable
    rationale: str
    outcome: Any  # designer.engineer.edits.EditOutcome (or None when the reply did not parse)
    reply_text: str
    error: str | None = None
    verdict: dict[str, Any] | None = None  # the critic's, in team mode
    log_ids: list[str] = field(default_factory=list)


@dataclass
class RoleCall:
    """The backend and what every call shares."""

    backend: Any
    builder: ContextBuilder
    constrained: bool
    max_tokens: int
    seed: int
    prompts: list[dict[str, Any]] = field(default_factory=list)  # every prompt rendered

    def ask(self, ctx: Context, template: str, schema: dict, n: int, **fields: str) -> list:
        prompt = self.builder.render(ctx, template, **fields)
        self.prompts.append({"template": template, "messages": prompt.messages,
                             "tokens": prompt.tokens, "cuts": prompt.cuts})
        return self.backend.generate(prompt.messages, schema, n=n, max_tokens=self.max_tokens,
                                     seed=self.seed + len(self.prompts))


def _draft(call: RoleCall, ctx: Context, reply: Any, edit: dict | None = None) -> Draft:
    obj = reply.edit if edit is None else edit
    ids = [reply.log_id] if getattr(reply, "log_id", None) else []
    if obj is None:
        return Draft(None, "", None, reply.text, reply.error or "no JSON object", log_ids=ids)
    outcome = apply_edit(ctx.space, obj, ctx.current, constrained=call.constrained)
    log = getattr(call.backend, "log", None)
    if log is not None and ids:  # the call log keeps what became of the reply
        log.annotate(ids[0], adjustments=[a.model_dump() for a in outcome.adjustments],
                     rejection=outcome.rejection)
    if outcome.rejection:
        return Draft(None, outcome.rationale, outcome, reply.text, outcome.rejection,
                     log_ids=ids)
    return Draft(outcome.values, outcome.rationale, outcome, reply.text, log_ids=ids)


def single(call: RoleCall, ctx: Context, n: int) -> list[Draft]:
    """The paper's mode: one prompt, n replies."""
    replies = call.ask(ctx, "single.md", edit_schema(ctx.space), n)
    return [_draft(call, ctx, r) for r in replies]


def team(call: RoleCall, ctx: Context, n: int) -> tuple[list[Draft], str]:
    """Analyst, engineer, critic; returns the drafts that survive and the diagnosis."""
    (a,) = call.ask(ctx, "analyst.md", DIAGNOSIS_SCHEMA, 1)
    diagnosis = str((a.edit or {}).get("diagnosis", "")).strip() or "(no diagnosis)"
    drafts = [_draft(call, ctx, r) for r in call.ask(ctx, "engineer.md", edit_schema(ctx.space),
                                                      n, diagnosis=diagnosis)]
    out = []
    for d in drafts:
        if d.values is None:
            out.append(d)
            continue
        edit = json.dumps(editable_values(ctx.space, d.values))
        (c,) = call.ask(ctx, "critic.md", critic_schema(ctx.space), 1, edit=edit,
                        rationale=d.rationale or "(none)", diagnosis=diagnosis)
        verdict = c.edit if isinstance(c.edit, dict) else {"verdict": "accept",
                                                          "reason": f"critic failed: {c.error}"}
        d.verdict = verdict
        if getattr(c, "log_id", None):
            d.log_ids.append(c.log_id)
        v = verdict.get("verdict")
        if v == "reject":
            d.values, d.error = None, f"rejected by the critic: {verdict.get('reason', '')}"
        elif v == "revise" and isinstance(verdict.get("revised"), dict):
            revised = _draft(call, ctx, c, edit=verdict["revised"])
            if revised.values is not None:
                d.values, d.outcome = revised.values, revised.outcome
        out.append(d)
    return out, diagnosis
