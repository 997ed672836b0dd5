"""`eval --llm`: whole plans from a backend, the answer file, resume, the stratified subset.

The backend is a scripted one (a real `Backend`: it answers each prompt with a reply fixed in
advance) and the logged-then-replayed `replay` backend. The expected tables come from the
plain-Python reference checker (`jaxenv.mapf.solvers.reference.ref_check_plan`) on the plans
as constructed, never from the code under test, and from hand counts.
"""

from __future__ import annotations

import json
from collections import Counter

import jax
import numpy as np
import pytest

from designer.cli import main
from designer.llm import BackendError, LoggedBackend, make_backend
from designer.llm.base import Reply
from designer.llm.calllog import CallLog
from designer.tasks.mapf.plans import evaluate as plan_eval
from designer.tasks.mapf.plans.answer_log import AnswerLog
from designer.tasks.mapf.plans.prompt import plan_messages, plan_schema
from jaxenv.mapf.benchmark.heldout import load_split
from jaxenv.mapf.benchmark.report import make_table
from jaxenv.mapf.plans import CHECKS, format_plan
from jaxenv.mapf.solvers.reference import ref_check_plan

N = 20
GARBAGE = ["", "I cannot solve this puzzle.", "A0: (r,c) -> (r,c) -> ...", '{"A0": [[0, 0],',
           "A0: (" + "9" * 500 + ",0)", "x" * 70_000, "\x00\x01 A1 = ((", "[[[[[[[[[[[["]


class Killed(Exception):
    """Stands in for the process dying mid-run (not a BackendError: nothing catches it)."""


class ScriptedBackend:
    """Answers each prompt with the reply scripted for it; counts calls; can die after k."""

    name, model, constrained = "scripted", "script-v0", False

    def __init__(self, replies: dict[str, str], die_after: int | None = None):
        self.replies, self.die_after = replies, die_after
        self.calls: list[str] = []
        self.schemas: list[dict | None] = []

    def count_tokens(self, messages) -> int:
        return sum(len(m["content"]) for m in messages) // 4

    def generate(self, messages, schema, n=1, max_tokens=256, seed=0) -> list[Reply]:
        if self.die_after is not None and len(self.calls) >= self.die_after:
            raise Killed()
        prompt = messages[-1]["content"]
        self.calls.append(prompt)
        self.schemas.append(schema)
        text = self.replies.get(prompt)
        if text is None:
            raise BackendError("scripted: no reply for this prompt")
        return [Reply(text=text, edit=None, error=None, prompt_tokens=self.count_tokens(messages),
                      completion_tokens=len(text) // 4, latency_s=0.0, backend=self.name,
                      model=self.model)]


@pytest.fixture(scope="module")
def heldout():
    return load_split("heldout")


def stored_plan(meta, p) -> list[list[tuple[int, int]]]:
    k = int(meta["agents"][p])
    return [[tuple(map(int, c)) for c in meta["plan_cells"][p, a, :meta["plan_len"][p, a]]]
            for a in range(k)]


def reference(levels, meta, p, plan):
    k, n = int(meta["agents"][p]), int(meta["size"][p])
    return ref_check_plan(size=n, holes=np.asarray(levels.holes[p])[:n, :n].tolist(),
                          starts=np.asarray(levels.starts[p])[:k].tolist(),
                          goals=np.asarray(levels.goals[p])[:k].tolist(), plan=plan,
                          n_agents=k)


def colliding(levels, meta, p, plan):
    """A plan whose only fault is a conflict: one agent waits 1-3 steps at its start."""
    for j in range(len(plan)):
        for w in (1, 2, 3):
            cand = [list(q) for q in plan]
            cand[j] = [cand[j][0]] * w + cand[j]
            r = reference(levels, meta, p, cand)
            if not r["conflict_free"] and all(r[c] for c in CHECKS if c != "conflict_free"):
                return cand
    return [plan[0]] * len(plan)  # every agent on agent 0's path: collides (and more)


@pytest.fixture(scope="module")
def script(heldout):
    """20 instances of the stratified order with replies of known verdicts.

    Cycle of 5: the stored (SoC-optimal) plan; every agent waits once at its start (valid,
    makespan + 1); a colliding plan; garbage; the stored plan as JSON.
    """
    levels, meta = heldout
    chosen = plan_eval.select(meta, limit=N)
    replies, expect = {}, []
    for i, p in enumerate(chosen.tolist()):
        plan = stored_plan(meta, p)
        kind = ("stored", "wait", "collide", "garbage", "json")[i % 5]
        if kind == "wait":
            plan = [[q[0]] + q for q in plan]
        elif kind == "collide":
            plan = colliding(levels, meta, p, plan)
        if kind == "garbage":
            text, ref_plan = GARBAGE[(i // 5) % len(GARBAGE)], None
        elif kind == "json":
            text, ref_plan = json.dumps({f"A{a}": q for a, q in enumerate(plan)}), plan
        else:
            text, ref_plan = format_plan(plan), plan
        lv = jax.tree.map(lambda x, p=p: x[p], levels)
        replies[plan_messages(lv)[-1]["content"]] = text
        r = reference(levels, meta, p, ref_plan)
        opt = bool(r["valid"] and r["makespan"] == int(meta["opt_makespan"][p]))
        expect.append((int(meta["index"][p]), kind, r, opt, p))
    return replies, expect


def expected_table(meta, expect):
    order = sorted(expect)
    pos = np.asarray([e[4] for e in order])
    return make_table([e[2]["valid"] for e in order], [e[3] for e in order],
                      meta["agents"][pos], meta["size"][pos], meta["subset"][pos],
                      [[e[2][c] for c in CHECKS] for e in order], split="heldout")


def test_scripted_eval_gives_the_expected_table(tmp_path, heldout, script):
    _, meta = heldout
    replies, expect = script
    backend = ScriptedBackend(replies)
    answers = AnswerLog(tmp_path / "a.jsonl")
    counts = plan_eval.ask(backend, answers, limit=N)
    assert counts == {"selected": N, "had": 0, "asked": N, "errors": 0}
    assert len(backend.calls) == N and backend.schemas == [None] * N
    res = plan_eval.evaluate(AnswerLog(tmp_path / "a.jsonl"))
    # hand counts: 4 of each kind; stored, wait and json plans are valid, collide and garbage
    # are not; the waiting plans are never optimal; garbage is unparsable
    kinds = Counter(e[1] for e in expect)
    assert kinds == {"stored": 4, "wait": 4, "collide": 4, "garbage": 4, "json": 4}
    assert int(res.valid.sum()) == 12
    assert int((~res.parsed).sum()) == 4
    by_id = {e[0]: e for e in expect}
    for i, v, o in zip(res.ids, res.valid, res.optimal, strict=True):
        kind, r, opt = by_id[int(i)][1:4]
        assert bool(v) == (kind in ("stored", "wait", "json")) == r["valid"], kind
        assert bool(o) == opt, kind
        if kind == "wait":
            assert not o
    n_opt = sum(e[3] for e in expect)
    # of the 8 stored/json plans (SoC-optimal), 6 are makespan-optimal
    assert int(res.optimal.sum()) == n_opt == 6
    assert res.table.overall.valid == pytest.approx(60.0)
    assert res.table.overall.optimal == pytest.approx(30.0)
    # the whole table, failure counts per cell included, equals the reference's
    assert res.table.to_dict() == expected_table(meta, expect).to_dict()
    md = plan_eval.markdown(res)
    assert "paper: Qwen3-4B base | 14.83 / 14.00" in md and "split: heldout (20 instances)" in md
    assert "Unparsable replies: 4/20" in md


def test_constrained_mode_passes_the_schema_and_reads_json(tmp_path, heldout, script):
    levels, meta = heldout
    _, expect = script
    chosen = plan_eval.select(meta, limit=3)
    replies = {}
    for p in chosen.tolist():
        lv = jax.tree.map(lambda x, p=p: x[p], levels)
        plan = stored_plan(meta, p)
        replies[plan_messages(lv, "json")[-1]["content"]] = json.dumps(
            {f"A{a}": q for a, q in enumerate(plan)})
    backend = ScriptedBackend(replies)
    answers = AnswerLog(tmp_path / "c.jsonl")
    plan_eval.ask(backend, answers, limit=3, mode="json")
    assert backend.schemas == [plan_schema(int(meta["agents"][p]), int(meta["size"][p]))
                               for p in chosen]
    assert plan_eval.evaluate(answers).valid.all()
    with pytest.raises(ValueError, match="another evaluation"):  # modes are never mixed
        plan_eval.ask(backend, AnswerLog(tmp_path / "c.jsonl"), limit=3, mode="text")


def test_killed_eval_resumes_without_redoing_answers(tmp_path, heldout, script):
    replies, _ = script
    path = tmp_path / "a.jsonl"
    with pytest.raises(Killed):
        plan_eval.ask(ScriptedBackend(replies, die_after=7), AnswerLog(path), limit=N)
    assert len(AnswerLog(path).answers) == 7
    second = ScriptedBackend(replies)
    counts = plan_eval.ask(second, AnswerLog(path), limit=N)
    assert counts["had"] == 7 and counts["asked"] == len(second.calls) == N - 7

    # a kill during a write: the last line is torn; that one answer is asked again
    data = path.read_bytes()
    path.write_bytes(data[:-25])
    log = AnswerLog(path)
    assert log.torn and len(log.answers) == N - 1
    third = ScriptedBackend(replies)
    assert plan_eval.ask(third, log, limit=N)["asked"] == len(third.calls) == 1
    lines = path.read_text().splitlines()
    assert len(lines) == N + 1 and all(json.loads(x) for x in lines)  # header + 20, no debris
    ids = [json.loads(x)["id"] for x in lines[1:]]
    assert len(set(ids)) == N
    fourth = ScriptedBackend(replies)
    assert plan_eval.ask(fourth, AnswerLog(path), limit=N)["asked"] == 0 and not fourth.calls

    # the resumed file scores like an uninterrupted one
    plan_eval.ask(ScriptedBackend(replies), AnswerLog(tmp_path / "b.jsonl"), limit=N)
    a, b = plan_eval.evaluate(AnswerLog(path)), plan_eval.evaluate(AnswerLog(tmp_path / "b.jsonl"))
    assert a.table.to_dict() == b.table.to_dict()

    # a damaged line in the middle is an error, not a silent skip
    lines[5] = lines[5][:10]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match="line 6"):
        AnswerLog(path)


def test_backend_errors_leave_instances_unanswered(tmp_path, heldout, script):
    replies, expect = script
    some = dict(list(replies.items())[:N - 2])  # no reply for two prompts: BackendError
    counts = plan_eval.ask(ScriptedBackend(some), AnswerLog(tmp_path / "e.jsonl"), limit=N)
    assert counts["errors"] == 2 and counts["asked"] == N - 2
    with pytest.raises(BackendError, match="in a row"):
        plan_eval.ask(ScriptedBackend({}), AnswerLog(tmp_path / "f.jsonl"), limit=N)
    assert len(AnswerLog(tmp_path / "f.jsonl").answers) == 0


@pytest.mark.parametrize("split", ["heldout", "validation"])
def test_stratified_subset_is_balanced_and_deterministic(split):
    _, meta = load_split(split)
    cells = {(int(a), int(s)) for a, s in zip(meta["agents"], meta["size"], strict=True)}
    assert len(cells) == plan_eval.n_cells(meta) == 21
    for k in (1, 2, 3, 7):
        sel = plan_eval.select(meta, per_cell=k)
        got = Counter((int(meta["agents"][p]), int(meta["size"][p])) for p in sel)
        assert set(got) == cells and set(got.values()) == {k}
        np.testing.assert_array_equal(sel, plan_eval.select(meta, per_cell=k))
        np.testing.assert_array_equal(sel, plan_eval.select(meta, limit=21 * k))
        if k == 3:  # three per cell: one of each wait-ratio subset
            sub = Counter((int(meta["agents"][p]), int(meta["size"][p]),
                           int(meta["subset_index"][p])) for p in sel)
            assert set(sub.values()) == {1} and len(sub) == 63
    order = plan_eval.eval_order(meta)
    assert sorted(order.tolist()) == list(range(len(meta["index"])))  # every instance once
    assert not np.array_equal(order, plan_eval.eval_order(meta, seed=1))
    # any prefix is as balanced as it can be
    got = Counter((int(meta["agents"][p]), int(meta["size"][p]))
                  for p in plan_eval.select(meta, limit=30))
    assert max(got.values()) - min(got.values()) <= 1 and len(got) == 21
    with pytest.raises(ValueError):
        plan_eval.select(meta, per_cell=0)


def test_cli_end_to_end_through_a_replayed_call_log(tmp_path, heldout, script, capsys):
    replies, expect = script
    calls = tmp_path / "calls.jsonl"
    plan_eval.ask(LoggedBackend(ScriptedBackend(replies), CallLog(calls)),
                  AnswerLog(tmp_path / "logged.jsonl"), limit=N)
    replay = make_backend("replay", log_path=calls)
    assert replay.name == "replay"

    answers, table = tmp_path / "answers.jsonl", tmp_path / "table.md"
    rc = main(["eval", "--llm", "--backend", "replay", "--model", str(calls), "--answers",
               str(answers), "--limit", str(N), "--table", str(table)])
    assert rc == 0
    out = capsys.readouterr().out
    assert "split: heldout (20 instances)" in out and "overall (20 instances): 60.00 / 30.00" in out
    assert table.read_text().strip() == out.strip()
    assert len(AnswerLog(answers).answers) == N
    # the same table from the finished file, no model
    assert main(["eval", "--llm", "--from", str(answers)]) == 0
    assert capsys.readouterr().out == out
    # resuming with nothing left to ask asks nothing (replay would fail past its log)
    assert main(["eval", "--llm", "--backend", "replay", "--model", str(calls), "--answers",
                 str(answers), "--limit", str(N)]) == 0
    # user errors: one line, status 2
    assert main(["eval", "--llm", "--from", str(tmp_path / "missing.jsonl")]) == 2
    assert main(["eval"]) == 2
    assert main(["eval", str(tmp_path), "--llm", "--from", str(answers)]) == 2
    assert main(["eval", "--llm", "--backend", "nope", "--answers", str(tmp_path / "x")]) == 2
    assert main(["eval", "--llm", "--backend", "replay", "--answers", str(tmp_path / "y")]) == 2
    err = capsys.readouterr().err
    assert "no such answers file" in err and "needs --model" in err


@pytest.mark.slow
@pytest.mark.parametrize("split", ["heldout", "validation"])
def test_every_stored_plan_fits_the_constrained_schema(split):
    jsonschema = pytest.importorskip("jsonschema")
    _, meta = load_split(split)
    for p in range(len(meta["index"])):
        k, n = int(meta["agents"][p]), int(meta["size"][p])
        plan = {f"A{a}": [list(c) for c in q] for a, q in enumerate(stored_plan(meta, p))}
        jsonschema.validate(plan, plan_schema(k, n))
    schema = plan_schema(3, 4)
    for bad in ({"A0": [[0, 0]], "A1": [[0, 1]]},  # an agent missing
                {"A0": [[0, 0]], "A1": [[0, 1]], "A2": [[4, 0]]},  # off the grid
                {"A0": [[0, 0]], "A1": [[0, 1]], "A2": [[1, 1]], "A3": [[2, 2]]},  # extra
                {"A0": [], "A1": [[0, 1]], "A2": [[1, 1]]}):  # an empty path
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
