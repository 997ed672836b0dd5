"""Reasoning roles of the LLM engineer: one call (`single`, the paper's) or a `team`.

Replies are written in one of two edit languages (`RoleCall.language`): raw `values` (the
edit schema of `designer.engineer.edits`) or `moves` (`designer.engineer.moves`: a
diagnosis, one to three moves, a short rationale). The templates are the same for both; the
knob list (`$knobs`: the admitted moves in the moves language) and the answer instructions
(`$answer`, `ANSWERS`) are filled per language.

- `single`: one prompt (F, G, H, T as configured), `n` sampled replies, each a JSON edit
  constrained by the edit schema;
- `team`: an **analyst** writes a short diagnosis from F and the trajectories; an **engineer**
  writes `n` candidate edits from the diagnosis with the rest of the context; a **critic**
  accepts, revises or rejects each candidate with a reason (e.g. it rejects an edit that drops
  the map sizes the evaluation uses, or one that makes every stage trivially easy). Every
  role's output is schema-constrained: the diagnosis a bounded printable string, the critic's
  verdict an enum with an optional revised edit. In the moves language the analyst's
  diagnosis is the moves reply's diagnosis enums, the engineer writes the moves, and the
  critic reads each candidate's verification scores (one `ctx.verify` call for all drafts,
  when the context can verify) before it keeps, revises (with moves) or rejects it.

Replies are data: parsed against the schema and applied with `designer.engineer.edits.apply_edit`
(constrained replies through `parse`, others through `project`) or, in moves,
`designer.engineer.moves.apply_moves`, never executed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from designer.engineer import moves as mv
from designer.engineer.context import Context, ContextBuilder, editable_values
from designer.engineer.edits import apply_edit, edit_schema, text_schema

DIAGNOSIS_SCHEMA = {
    "type": "object", "properties": {"diagnosis": text_schema(300)},
    "required": ["diagnosis"], "additionalProperties": False,
}
VERDICTS = ("accept", "revise", "reject")
LANGUAGES = tuple(e for e in mv.EDITS if e != "auto")  # the languages a reply is written in

# The answer instructions of each template (`$answer`), per edit language.
_EDIT_VALUES = ('Write one JSON object: the knobs to change and a "rationale" (one or two '
                "sentences: what fails\nand what your edit changes).")
_EDIT_MOVES = ('One JSON object: {$diag"moves": $count from the list above$never, '
               '"rationale": a few words}.')
_DIAG = ('"training": "too_easy" | "about_right" | "too_hard", "weakest": the weakest cell of '
         "F$example, ")
ANSWERS: dict[tuple[str, str], str] = {
    ("values", "single.md"): _EDIT_VALUES,
    ("values", "engineer.md"): 'Write one JSON object: the knobs to change and a "rationale" '
                               "(one or two sentences).",
    ("values", "analyst.md"): 'One JSON object: {"diagnosis": "..."}.',
    ("values", "critic.md"): 'One JSON object: {"verdict": "accept" | "revise" | "reject", '
                             '"reason": "...", and, for\n"revise", "revised": the corrected '
                             "edit}.",
    ("moves", "single.md"): _EDIT_MOVES,
    ("moves", "engineer.md"): _EDIT_MOVES,
    ("moves", "analyst.md"): "One JSON object: {$diag}.",
    ("moves", "critic.md"): 'One JSON object: {"verdict": "accept" | "revise" | "reject", '
                            '"reason": "...", and, for "revise", "revised": 1 to 3 moves from '
                            "the list}.",
}


def critic_schema(space: Any, current: Any = None, language: str = "values") -> dict[str, Any]:
    """The critic's verdict; its revision is an edit (values) or a list of moves (moves)."""
    revised = edit_schema(space) if language == "values" else \
        mv.moves_schema(space, current, None)["properties"][mv.MOVES]
    return {"type": "object",
            "properties": {"verdict": {"type": "string", "enum": list(VERDICTS)},
                           "reason": text_schema(160),
                           "revised": revised},
            "required": ["verdict", "reason"], "additionalProperties": False}


def answer(language: str, template: str, cells: list[str] | None = None,
           diagnosis: bool = True, moves: int = mv.MAX_MOVES) -> str:
    """The `$answer` text of `template` in `language` (the moves diagnosis's fields when the
    reply writes them, with F's weakest cell as the example; `moves` per reply)."""
    example = f' (e.g. "{cells[0]}")' if cells else ' ("none": there is no F)'
    diag = _DIAG.replace("$example", example) if diagnosis else ""
    count, never = ("1 move", "") if moves == 1 else \
        (f"1 to {moves} moves", " (never two on one target)")
    text = ANSWERS[(language, template)].replace("$diag", diag)
    text = text.replace("$count", count).replace("$never", never)
    return text.replace(", }", "}") if template == "analyst.md" else text


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
    language: str = "values"  # the edit language of the replies (module docstring)
    moves: int = mv.MAX_MOVES  # moves per reply in the moves language (`moves_per_reply`)
    prompts: list[dict[str, Any]] = field(default_factory=list)  # every prompt rendered

    def __post_init__(self) -> None:
        if self.language not in LANGUAGES:
            raise ValueError(f"unknown edit language {self.language!r} (known: "
                             f"{', '.join(LANGUAGES)})")

    def ask(self, ctx: Context, template: str, schema: dict, n: int, *,
            reply_diagnosis: bool = True, **fields: str) -> list:
        """`n` replies to `template` under `schema`; `reply_diagnosis`: the moves reply writes
        the diagnosis itself (no analyst's to read)."""
        fields = {**prompt_fields(self.language, ctx, template, reply_diagnosis, self.moves),
                  **fields}
        prompt = self.builder.render(ctx, template, **fields)
        self.prompts.append({"template": template, "messages": prompt.messages,
                             "tokens": prompt.tokens, "cuts": prompt.cuts})
        return self.backend.generate(prompt.messages, schema, n=n, max_tokens=self.max_tokens,
                                     seed=self.seed + len(self.prompts))


def prompt_fields(language: str, ctx: Context, template: str = "single.md",
                  reply_diagnosis: bool = True, moves: int = mv.MAX_MOVES) -> dict[str, str]:
    """The template fields that depend on the edit language: the answer instructions and, in
    moves, the admitted moves as the knob list."""
    fields = {"answer": answer(language, template, _cells(ctx), reply_diagnosis, moves)}
    if language == "moves":
        fields["knobs"] = mv.menu(ctx.space, ctx.current)
    return fields


def _cells(ctx: Context) -> list[str] | None:
    """F's cell labels (the weakest-cell enum of a moves diagnosis), None without an F."""
    return None if ctx.failures is None else ctx.failures.cell_labels()


def _draft(call: RoleCall, ctx: Context, reply: Any, edit: dict | None = None,
           diagnosis: dict | None = None) -> Draft:
    obj = reply.edit if edit is None else edit
    ids = [reply.log_id] if getattr(reply, "log_id", None) else []
    if obj is None:
        return Draft(None, "", None, reply.text, reply.error or "no JSON object", log_ids=ids)
    if call.language == "moves":
        outcome = mv.apply_moves(ctx.space, obj, ctx.current, _cells(ctx),
                                 constrained=call.constrained, diagnosis=diagnosis)
    else:
        outcome = apply_edit(ctx.space, obj, ctx.current, constrained=call.constrained)
    log = getattr(call.backend, "log", None)
    if log is not None and ids:  # the call log keeps what became of the reply
        log.annotate(ids[0], adjustments=[a.model_dump() for a in outcome.adjustments],
                     rejection=outcome.rejection)
    if outcome.rejection:
        return Draft(None, outcome.rationale, outcome, reply.text, outcome.rejection,
                     log_ids=ids)
    return Draft(outcome.values, outcome.rationale, outcome, reply.text, log_ids=ids)


def reply_schema(call: RoleCall, ctx: Context, diagnosis: bool = True) -> dict[str, Any]:
    """The grammar of a candidate reply in the call's language."""
    if call.language == "values":
        return edit_schema(ctx.space)
    return mv.moves_schema(ctx.space, ctx.current, _cells(ctx), diagnosis=diagnosis,
                           max_moves=call.moves)


def single(call: RoleCall, ctx: Context, n: int) -> list[Draft]:
    """The paper's mode: one prompt, n replies."""
    replies = call.ask(ctx, "single.md", reply_schema(call, ctx), n)
    return [_draft(call, ctx, r) for r in replies]


def team(call: RoleCall, ctx: Context, n: int) -> tuple[list[Draft], str]:
    """Analyst, engineer, critic; returns the drafts that survive and the diagnosis."""
    if call.language == "moves":
        return _team_moves(call, ctx, n)
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
        c = _critic(call, ctx, d, edit=edit, diagnosis=diagnosis, scores="")
        if c is not None and d.values is not None:
            revised = _draft(call, ctx, c, edit=d.verdict["revised"])
            if revised.values is not None:
                d.values, d.outcome = revised.values, revised.outcome
        out.append(d)
    return out, diagnosis


def _team_moves(call: RoleCall, ctx: Context, n: int) -> tuple[list[Draft], str]:
    """The team in the moves language: the analyst's diagnosis enums, the engineer's moves,
    the critic's verdict on each candidate with its verification scores."""
    cells = _cells(ctx)
    (a,) = call.ask(ctx, "analyst.md", mv.analyst_schema(cells), 1)
    diag = mv.read_diagnosis(a.edit, cells)
    diagnosis = "(no diagnosis)" if diag is None else \
        f"training {diag['training']}; weakest {diag['weakest']}"
    replies = call.ask(ctx, "engineer.md", reply_schema(call, ctx, diagnosis=diag is None), n,
                       diagnosis=diagnosis, reply_diagnosis=diag is None)
    drafts = [_draft(call, ctx, r, diagnosis=diag) for r in replies]
    usable = [d for d in drafts if d.values is not None]
    scores = ctx.verify([d.values for d in usable]) if ctx.verify and usable else None
    for i, d in enumerate(usable):
        shown = "" if scores is None else (
            f"\nIts verification with the current policy: success {scores[i].success:.2f}, "
            f"learnability {scores[i].learnability:.2f} (highest at success 0.5).")
        c = _critic(call, ctx, d, edit="; ".join(d.outcome.moves), diagnosis=diagnosis,
                    scores=shown)
        if c is not None and d.values is not None:
            revised = _draft(call, ctx, c, edit={mv.MOVES: d.verdict["revised"],
                                                 "rationale": d.rationale},
                             diagnosis=d.outcome.diagnosis or {})
            if revised.values is not None:
                d.values, d.outcome = revised.values, revised.outcome
    return drafts, diagnosis


def _critic(call: RoleCall, ctx: Context, d: Draft, *, edit: str, diagnosis: str,
            scores: str) -> Any:
    """The critic's verdict on draft `d` (recorded in it; a reject clears its values); the
    critic's reply when it revises, else None."""
    (c,) = call.ask(ctx, "critic.md", critic_schema(ctx.space, ctx.current, call.language), 1,
                    edit=edit, rationale=d.rationale or "(none)", diagnosis=diagnosis,
                    scores=scores)
    verdict = c.edit if isinstance(c.edit, dict) else {"verdict": "accept",
                                                      "reason": f"critic failed: {c.error}"}
    d.verdict = verdict
    if getattr(c, "log_id", None):
        d.log_ids.append(c.log_id)
    v = verdict.get("verdict")
    if v == "reject":
        d.values, d.error = None, f"rejected by the critic: {verdict.get('reason', '')}"
    elif v == "revise" and isinstance(verdict.get("revised"),
                                      list if call.language == "moves" else dict):
        return c
    return None
