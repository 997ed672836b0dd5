"""Whole-plan evaluation of any LLM on a frozen split: the paper's trainee setting, measured.

`ask(backend, answers, ...)` renders each instance as the paper's prompt
(`designer.tasks.mapf.plans.prompt`), asks the backend for all agents' plans in one reply (free
text by default, a JSON-schema constrained reply with ``mode="json"``) and appends every answer
to the answer file as it arrives (`designer.tasks.mapf.plans.answer_log`): a stop at any point
loses at most the answer being written, and the next call skips every instance already answered.
`evaluate(answers)` then parses every reply with the bounded parser and checks them all in **one**
batched verifier call (`jaxenv.mapf.plans.verify_batch`), and `markdown(result)` prints the
paper-style table (valid % / optimal % by agents x map size, failed checks per cell) beside
the paper's rows. `evaluate` needs no model: a finished answer file is all it reads.

Which instances: `eval_order(meta)` lists a split in a fixed stratified order, round-robin
over the (agents, size) cells with the wait-ratio subsets interleaved inside each cell and a
seeded shuffle within a subset. ``limit`` takes a prefix of that order, so ``per_cell=k`` (=
``limit=k * cells``) is a subset with exactly k instances per cell, any prefix is as balanced
as it can be, and a longer run extends a shorter one.

Replies are data: any text, however broken, is a parse failure, never an exception. A backend
that cannot answer (`BackendError`) leaves that instance unanswered (a later run retries it);
`MAX_ERRORS_IN_A_ROW` such errors stop the run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jax
import numpy as np

from designer.llm.base import BackendError
from designer.tasks.mapf.plans.answer_log import AnswerLog
from designer.tasks.mapf.plans.prompt import MODES, PROMPT_VERSION, plan_messages, plan_schema
from jaxenv.mapf.benchmark.heldout import load_split
from jaxenv.mapf.benchmark.report import Table, format_markdown, make_table
from jaxenv.mapf.level import Level
from jaxenv.mapf.plans import CHECKS, verify_texts
from jaxenv.mapf.plans.verify import MAX_PLAN_STEPS  # cells per path read (longer: unparsable)

MAX_ERRORS_IN_A_ROW = 3
MAX_AGENTS = 5  # the held-out split's largest agent count
MAX_SIZE = 10

# The paper's rows (valid % / optimal %, mean over map sizes, 3 / 4 / 5 agents);
# /work/shared/paper.md "Results".
PAPER_ROWS: dict[str, list[tuple[float, float]]] = {
    "GPT-5.4": [(32.50, 20.58), (17.05, 10.86), (9.11, 6.00)],
    "Grok-4.2": [(33.42, 21.00), (23.43, 15.33), (12.89, 8.78)],
    "Gemini-3.1-Pro": [(24.50, 15.33), (12.95, 10.10), (4.78, 3.56)],
    "Kimi-K2.5": [(46.17, 29.25), (26.95, 17.90), (13.47, 8.78)],
    "Qwen3-4B base": [(14.83, 14.00), (3.43, 3.05), (1.44, 1.22)],
    "Qwen3-4B + GRPO, fixed random config": [(40.42, 26.08), (26.67, 16.10), (15.11, 9.11)],
    "Qwen3-4B + GRPO + engineer": [(51.67, 31.67), (33.14, 21.33), (18.67, 11.00)],
}

Progress = Callable[[int, int, dict[str, Any]], None]  # (done, total, the answer just written)


def eval_order(meta: dict[str, Any], seed: int = 0) -> np.ndarray:
    """Positions into a split (rows of `load_split`'s batch) in the stratified order (see the
    module docstring); deterministic for a given split and seed."""
    agents = np.asarray(meta["agents"], np.int64)
    size = np.asarray(meta["size"], np.int64)
    sub = np.asarray(meta["subset_index"], np.int64)
    cells = sorted({(int(a), int(s)) for a, s in zip(agents, size, strict=True)})
    queues: list[list[int]] = []
    for a, s in cells:
        in_cell = (agents == a) & (size == s)
        per_subset = []
        for j in np.unique(sub[in_cell]).tolist():
            idx = np.flatnonzero(in_cell & (sub == j))
            rng = np.random.default_rng([seed, a, s, j])
            per_subset.append(idx[rng.permutation(len(idx))].tolist())
        # interleave the subsets: s0[0], s1[0], s2[0], s0[1], ...
        longest = max(len(q) for q in per_subset)
        queues.append([q[r] for r in range(longest) for q in per_subset if r < len(q)])
    longest = max((len(q) for q in queues), default=0)
    return np.asarray([q[r] for r in range(longest) for q in queues if r < len(q)], np.int64)


def n_cells(meta: dict[str, Any]) -> int:
    """The number of (agents, size) cells of a split."""
    return len({(int(a), int(s)) for a, s in zip(meta["agents"], meta["size"], strict=True)})


def select(meta: dict[str, Any], *, limit: int | None = None, per_cell: int | None = None,
           seed: int = 0) -> np.ndarray:
    """The positions to evaluate: the stratified order, cut to `limit` and/or `per_cell`
    instances per (agents, size) cell (both given: the smaller)."""
    order = eval_order(meta, seed)
    n = len(order)
    if per_cell is not None:
        if per_cell < 1:
            raise ValueError(f"per_cell must be at least 1, got {per_cell}")
        n = min(n, per_cell * n_cells(meta))
    if limit is not None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        n = min(n, limit)
    return order[:n]


def _level(levels: Level, i: int) -> Level:
    return jax.tree.map(lambda x: x[i], levels)


def header(split: str, mode: str, backend: Any, model: str | None, max_tokens: int,
           seed: int) -> dict[str, Any]:
    """What decides the answers (the answer file refuses to mix two of these)."""
    return {"split": split, "mode": mode, "prompt_version": PROMPT_VERSION,
            "backend": str(getattr(backend, "name", "?")), "model": model or "default",
            "max_tokens": int(max_tokens), "seed": int(seed)}


def ask(backend: Any, answers: AnswerLog, *, split: str = "heldout", mode: str = "text",
        limit: int | None = None, per_cell: int | None = None, max_tokens: int = 1024,
        seed: int = 0, model: str | None = None,
        progress: Progress | None = None) -> dict[str, int]:
    """Ask `backend` for the plans of the selected instances not yet in `answers`.

    `model`: the model the user named (recorded in the header; None: the backend's default).
    Returns counts: ``selected``, ``had`` (answered before), ``asked``, ``errors``.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
    levels, meta = load_split(split, MAX_SIZE, MAX_AGENTS)
    answers.start(header(split, mode, backend, model, max_tokens, seed))
    chosen = select(meta, limit=limit, per_cell=per_cell, seed=seed)
    ids = meta["index"]
    todo = [int(p) for p in chosen if int(ids[p]) not in answers.answers]
    counts = {"selected": len(chosen), "had": len(chosen) - len(todo), "asked": 0, "errors": 0}
    in_a_row = 0
    for p in todo:
        level = _level(levels, p)
        k, n = int(meta["agents"][p]), int(meta["size"][p])
        schema = plan_schema(k, n) if mode == "json" else None
        t = time.perf_counter()
        try:
            reply = backend.generate(plan_messages(level, mode), schema, n=1,
                                     max_tokens=max_tokens, seed=seed + int(ids[p]))[0]
        except BackendError as e:
            counts["errors"] += 1
            in_a_row += 1
            if in_a_row >= MAX_ERRORS_IN_A_ROW:
                raise BackendError(f"{in_a_row} backend errors in a row, stopping (answers "
                                   f"so far are kept; run again to resume): {e}") from None
            continue
        in_a_row = 0
        text = reply.text if isinstance(reply.text, str) else str(reply.text)
        rec = {"kind": "answer", "id": int(ids[p]), "split": split, "agents": k, "size": n,
               "subset": float(meta["subset"][p]), "text": text,
               "prompt_tokens": int(reply.prompt_tokens),
               "completion_tokens": int(reply.completion_tokens),
               "seconds": round(time.perf_counter() - t, 4), "error": reply.error,
               "backend": reply.backend, "model": reply.model}
        answers.append(rec)
        counts["asked"] += 1
        if progress is not None:
            progress(counts["had"] + counts["asked"], counts["selected"], rec)
    return counts


# --------------------------------------------------------------------------------- scoring
@dataclass
class EvalResult:
    """Per-instance verdicts of an answer file (in file-row order) and their table."""

    table: Table
    header: dict[str, Any]
    ids: np.ndarray  # [N] rows in the split's file
    valid: np.ndarray  # [N] bool
    optimal: np.ndarray  # [N] bool
    parsed: np.ndarray  # [N] bool: the parser read a plan (the "parsable" check)
    checks: np.ndarray  # [N, 8] bool, order CHECKS
    cost: str
    stats: dict[str, float] = field(default_factory=dict)
    models: list[str] = field(default_factory=list)  # the models the replies name


def evaluate(answers: AnswerLog, cost: str = "makespan") -> EvalResult:
    """Parse every answer and verify all of them in one batched verifier call (no model)."""
    if answers.header is None or not answers.answers:
        raise ValueError(f"{answers.path} holds no answers")
    split = str(answers.header.get("split"))
    levels, meta = load_split(split, MAX_SIZE, MAX_AGENTS)
    row_of = {int(r): p for p, r in enumerate(meta["index"])}
    ids = np.asarray(sorted(answers.answers), np.int64)
    missing = [int(i) for i in ids if int(i) not in row_of]
    if missing:
        raise ValueError(f"{answers.path}: ids {missing[:5]} are not instances of the "
                         f"{split} split")
    pos = np.asarray([row_of[int(i)] for i in ids], np.int64)
    v = verify_texts(jax.tree.map(lambda x: x[pos], levels),
                     [answers.answers[int(i)].get("text") for i in ids], cost, MAX_PLAN_STEPS)
    valid, optimal, checks = np.asarray(v.valid), np.asarray(v.optimal), np.asarray(v.checks)
    table = make_table(valid, optimal, meta["agents"][pos], meta["size"][pos],
                       meta["subset"][pos], checks, split=split)
    recs = [answers.answers[int(i)] for i in ids]
    stats = {
        "answers": float(len(ids)),
        "mean_completion_tokens": float(np.mean([_num(r.get("completion_tokens"))
                                                 for r in recs])),
        "mean_seconds": float(np.mean([_num(r.get("seconds")) for r in recs])),
        "total_seconds": float(np.sum([_num(r.get("seconds")) for r in recs])),
        "cut": float(sum(1 for r in recs if _num(r.get("completion_tokens"))
                         >= _num(answers.header.get("max_tokens")) > 0)),
    }
    models = sorted({str(r.get("model")) for r in recs})
    return EvalResult(table, dict(answers.header), ids, valid, optimal,
                      checks[:, CHECKS.index("parsable")], checks, cost, stats, models)


def _num(x: Any) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return 0.0
    return v if np.isfinite(v) else 0.0


def paper_rows(result: EvalResult, label: str) -> str:
    """Markdown: this model's valid % / optimal % (mean over sizes) beside the paper's rows."""
    m = result.table.mean_over_sizes
    cells = [f"{m[k].valid:.2f} / {m[k].optimal:.2f}" if k in m else "-" for k in (3, 4, 5)]
    out = ["| model | 3 agents | 4 agents | 5 agents |", "|---|---|---|---|",
           f"| **{label}** | " + " | ".join(cells) + " |"]
    for name, row in PAPER_ROWS.items():
        out.append(f"| paper: {name} | " + " | ".join(f"{v:.2f} / {o:.2f}" for v, o in row)
                   + " |")
    return "\n".join(out)


def markdown(result: EvalResult, title: str | None = None) -> str:
    """The full report: the comparison with the paper, the paper-style table, the stats."""
    h = result.header
    model = h.get("model")
    if model in (None, "default"):
        model = ", ".join(result.models)
    label = f"{h.get('backend')}:{model} ({h.get('mode')})"
    s = result.stats
    parse_fail = int((~result.parsed).sum())
    n = len(result.ids)
    lines = [
        f"## {title or 'Whole-plan evaluation'}: {label}", "",
        f"{n} instances of the {h.get('split')} split; replies: "
        f"{'free text' if h.get('mode') == 'text' else 'JSON-schema constrained'} "
        f"(prompt {h.get('prompt_version')}, max_tokens {h.get('max_tokens')}, seed "
        f"{h.get('seed')}); optimal = valid at the optimal {result.cost}.",
        f"Unparsable replies: {parse_fail}/{n}; cut at max_tokens: {int(s['cut'])}; mean "
        f"completion tokens {s['mean_completion_tokens']:.1f}; mean seconds per reply "
        f"{s['mean_seconds']:.2f} ({s['total_seconds']:.0f} s in all).", "",
        "valid % / optimal %, mean over map sizes (the paper's rows: its full held-out set)", "",
        paper_rows(result, f"this model ({n} instances)"), "",
        format_markdown(result.table, title=f"{label}"),
    ]
    return "\n".join(lines)
