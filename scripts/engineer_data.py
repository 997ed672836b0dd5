"""The engineer's dataset: contexts of the closed loop, each with every admitted single move
scored by the loop's verification and, for some, the realized effect of training on it.

The loop itself (`designer.run.loop.ClosedLoop`) runs at a small budget, one run per seed, its
engineer (the proposer: ``dr``, ``mutate``, ``rules``, or the base ``llm`` on request) chosen by
the seed (`proposer_of`), so that the contexts cover easy, right and hard stages. A wrapper
engineer (`Recording`) sees each stage's `Context` before the proposer answers and records it:

- the prompt messages the ``llm`` engineer in the moves language (single role) would be sent
  for this context, rendered by the project's own roles and context builder with SmolLM2's
  token count (`--tokens approx`: the tokenizer-free estimate), so training sees what the
  runtime model sees;
- every admitted single move (`moves.admitted`), each compiled with `moves.apply_moves` on a
  one-move reply carrying the target diagnosis (`diagnose`), scored with the loop's own
  `CandidateScorer` (its settings; `k` padded to every move the space can spell, so one jitted
  call per context and no recompile between contexts), under the loop's verification key;
- on every `--realized-every`-th stage, the realized effect of `--realized-moves` moves (the
  proxy's best, its worst, then random ones) and of the current config unchanged (the
  baseline): one more stage trained from the same trainee state under each config, with the
  keys the loop's next stage uses, then the validation split scored by the task's `score`;
  realized gain = that score minus the baseline's (`--realized-keys R`: each score the mean
  over R training keys; `--noise`: the baseline once more under R other keys, the noise
  floor a gain is read against).

Seeds 0-4 are reserved for evaluating engineers and refused; training contexts come from seeds
10-49, held-out contexts (for evaluating a trained engineer, never for training) from 50-54.

Row format (JSONL, one row per context, keyed by (task, seed, proposer, stage)):

    {"key": [task, seed, proposer, stage], "task": "mapf", "preset": "paper" | null,
     "seed": 12, "proposer": "dr", "stage": 1, "stages": 4, "split": "train" | "heldout",
     "messages": [{"role": "system", "content": ...}, {"role": "user", "content": ...}],
     "prompt_tokens": 812, "prompt_cuts": [...],
     "current": {knob: value | {key: value}},      # editable values trained on this stage
     "cells": ["2 agents 9x9", ...],              # F's cell labels, weakest first
     "train_success": 0.62, "validation_score": 0.41,   # the task's score on validation
     "diagnosis": {"training": "about_right", "weakest": "2 agents 9x9"},
     "diagnosis_rule": "...",                     # how the target diagnosis was made
     "moves": [{"move": "raise hole_ratio 9 small",
                "reply": "{\\"training\\":...,\\"moves\\":[...],\\"rationale\\":\\"\\"}",
                "values": {knob: ...},            # editable values after the move
                "score": {success, learnability, coverage, distance, episodes, outcomes, p,
                          signal, normalized_return},
                "inside": true,                  # p inside the choice rule's [floor, ceiling]
                "choice_score": 0.24 | null,     # the number the rule ranks by (learnability),
                                                 # null outside the band
                "realized": null | {"score": 0.44, "gain": 0.03}}, ...],
     "best": 7 | null,                           # the choice rule's pick, null: keep current
     "baseline": null | {"score": 0.41, "gain": 0.0, "repeat_score": 0.43 (--noise only)},
     "seconds": {"table": 3.1, "realized": 0.0}}

`reply` is the exact text the moves grammar of one move (`moves_schema(..., max_moves=1)`)
writes for the target diagnosis and that move with an empty rationale. The file is written
line by line (flushed and synced); a rerun with the same arguments continues after a kill: a
torn last line is dropped and rows already present are never written again. Beside it,
`<out>.meta.json` records the command, commit, seeds, proposers, budget and machine.

    python scripts/engineer_data.py --task mapf --seeds 10-29,50-54 \\
        --out /work/data/engineer/mapf.jsonl --realized-every 2 --realized-moves 3
    python scripts/engineer_data.py --report /work/data/engineer/mapf.jsonl
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

EVAL_SEEDS = range(0, 5)  # reserved for evaluating engineers: never in the dataset
HELDOUT_SEEDS = range(50, 55)  # held-out contexts: evaluating a trained engineer only
MIX = ("dr", "mutate", "rules")  # the default proposers (llm is slow on a CPU: by flag)
PROPOSERS = ("dr", "mutate", "rules", "llm")
# The small budget of a dataset run per task: stages, env steps per stage, the trainee block,
# the loop's verification episodes and the move table's episodes per move (MAPF's table holds
# about 140 moves, CartPole's 60).
BUDGETS: dict[str, dict[str, Any]] = {
    "mapf": {"stages": 3, "stage_steps": 256 * 32 * 8, "verify_episodes": 128,
             "table_episodes": 32,
             "trainee": {"num_envs": 256, "num_steps": 32, "pool_size": 256}},
    "cartpole": {"stages": 5, "stage_steps": 128 * 128 * 8, "verify_episodes": 128,
                 "table_episodes": 128, "trainee": {"num_envs": 128, "num_steps": 128}},
}


# ------------------------------------------------------------------------ the target
def diagnose(train_success: float, cells: Sequence[str], low: float, high: float
             ) -> dict[str, str]:
    """The target diagnosis of a context. Training by the rules engineer's thresholds on the
    stage's training success (`RulesEngineer.low`, `.high`): above `high` too_easy, below
    `low` too_hard, else about_right. Weakest: F's cell with the lowest score (its labels come
    weakest first), "none" without an F."""
    from designer.engineer.moves import NO_CELL

    training = ("too_easy" if train_success > high else "too_hard" if train_success < low
                else "about_right")
    return {"training": training, "weakest": cells[0] if cells else NO_CELL}


def proxy(move: Mapping[str, Any]) -> float:
    """A move's verification proxy as one number ordered like the choice rule: its
    learnability inside the [floor, ceiling] band, learnability - 1 outside (every move the
    rule may choose ranks above every move it never chooses)."""
    lrn = float(move["score"]["learnability"])
    return lrn if move["inside"] else lrn - 1.0


# ------------------------------------------------------------------------- the rows
def row_key(row: Mapping[str, Any]) -> tuple:
    return tuple(row["key"])


class Rows:
    """The JSONL file: rows read back (a torn last line cut off), new rows appended whole."""

    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.keys: set[tuple] = set()
        if path.exists():
            data = path.read_bytes()
            end = data.rfind(b"\n") + 1
            if end < len(data):  # a line cut by a kill: dropped
                with path.open("r+b") as f:
                    f.truncate(end)
            self.keys = {row_key(r) for r in read_rows(path)}

    def __contains__(self, key: tuple) -> bool:
        return key in self.keys

    def append(self, row: Mapping[str, Any]) -> None:
        key = row_key(row)
        if key in self.keys:
            return
        with self.path.open("a") as f:
            f.write(json.dumps(row, separators=(",", ":")) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.keys.add(key)


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """The whole rows of a dataset file, the first of each key (a torn last line skipped). A
    file that cannot be read, or another line that is not a keyed JSON object, is a ValueError
    naming the line: the file is not a dataset, and nothing is appended to it."""
    try:
        lines = Path(path).read_text().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: cannot be read ({e.__class__.__name__})") from None
    out, seen = [], set()
    for n, line in enumerate(lines, 1):
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            if n == len(lines):
                continue
            raise ValueError(f"{path} line {n}: not JSON") from None
        if not isinstance(row, dict) or not isinstance(row.get("key"), list):
            raise ValueError(f"{path} line {n}: not a row of a dataset (a JSON object with "
                             "a key list)")
        if row_key(row) not in seen:
            seen.add(row_key(row))
            out.append(row)
    return out


# --------------------------------------------------------------------- the recorder
class _Tap:
    """The loop's trainee, keeping the state its last `train_stage` returned (the state the
    stage's context was measured on, and the checkpoint realized stages start from) and its
    last evaluation of each split."""

    def __init__(self, inner: Any):
        self._inner = inner
        self.state: Any = None
        self.evaluated: dict[int, Any] = {}  # id(split) -> its last SplitEval

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def train_stage(self, state: Any, config: Any, key: Any) -> Any:
        out = self._inner.train_stage(state, config, key)
        self.state = out[0]
        return out

    def evaluate_split(self, state: Any, split: Any, key: Any) -> Any:
        out = self._inner.evaluate_split(state, split, key)
        self.evaluated[id(split)] = out
        return out


class _PromptOnly:
    """A backend that answers nothing: `roles.single` renders and records the prompt the
    llm engineer would send, and no model is asked."""

    name, model, constrained = "prompt-only", "none", True

    def __init__(self, count_tokens: Any):
        self.count_tokens = count_tokens

    def generate(self, *args: Any, **kwargs: Any) -> list:
        return []


class Recording:
    """The loop's engineer (the proposer), recording each context before it answers."""

    def __init__(self, inner: Any, recorder: ContextRecorder):
        object.__setattr__(self, "_inner", inner)
        object.__setattr__(self, "_recorder", recorder)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._inner, name, value)

    def propose(self, context: Any) -> list:
        self._recorder.record(context)
        return self._inner.propose(context)


class ContextRecorder:
    """Builds and writes one row per context of one loop run (module docstring)."""

    def __init__(self, loop: Any, rows: Rows, *, head: dict[str, Any], tokens: str,
                 table_episodes: int, realized_every: int, realized_moves: int,
                 noise: bool = False, realized_keys: int = 1):
        from designer.engineer import moves as mv
        from designer.engineer.engineers import RulesEngineer
        from designer.engineer.registry import make_engineer

        self.loop, self.rows, self.head = loop, rows, head
        self.realized_every, self.realized_moves = realized_every, realized_moves
        self.noise, self.realized_keys = noise, realized_keys
        s = type(loop.s).model_validate({**loop.s.model_dump(), "engineer": "llm",
                                         "edits": "moves"})
        count = None
        if tokens == "model":
            from designer.llm.open import open_backend

            count = open_backend(s, None).count_tokens
        self.llm = make_engineer(s, backend=_PromptOnly(count), task=loop.task)
        rules = RulesEngineer(loop.task.curriculum)
        self.low, self.high = rules.low, rules.high
        # every move the space can spell: one jitted call per context, whatever is admitted
        spelled = sum(len(mv.spellings(t)) for t in mv.targets(loop.space))
        self.scorer = copy.copy(loop.scorer)
        self.scorer.k, self.scorer.episodes = spelled, loop.trainee.verify_episodes(
            table_episodes)

    def record(self, ctx: Any) -> None:
        key = (*self.head["key"], ctx.stage)
        if key in self.rows:
            return
        from designer.engineer import moves as mv
        from designer.engineer.context import editable_values
        from designer.engineer.roles import RoleCall, single

        loop, space, t0 = self.loop, self.loop.space, time.perf_counter()
        call = RoleCall(self.llm.backend, self.llm.builder, True, self.llm.max_tokens,
                        seed=loop.s.seed * 1000 + 10 * ctx.stage, language="moves",
                        moves=mv.moves_per_reply("transformers"))  # the embedded model's
        single(call, ctx, 1)
        prompt = call.prompts[0]
        cells = [] if ctx.failures is None else list(ctx.failures.cell_labels())
        p = float(ctx.train.get("success_rate", 0.0))
        diag = diagnose(p, cells, self.low, self.high)
        table = []
        for move in mv.admitted(space, ctx.current):
            out = mv.apply_moves(space, mv.reply(diag, [move]), ctx.current, cells or None,
                                 constrained=True)
            if out.values is None:
                raise RuntimeError(f"admitted move {move!r} was rejected: {out.rejection}")
            table.append({"move": move, "reply": mv.reply_text(diag, [move]),
                          "config": out.values, "values": editable_values(space, out.values)})
        policy = loop.trainee.policy(loop.trainee.state)
        scores = self.scorer.score(policy, [m["config"] for m in table], ctx.current,
                                   loop.key(ctx.stage, 7))
        for m, sc in zip(table, scores):
            m["score"] = sc.to_dict()
            m["inside"] = bool(self.scorer.floor <= sc.p <= self.scorer.ceiling)
            m["choice_score"] = sc.learnability if m["inside"] else None
            m["realized"] = None
        t1 = time.perf_counter()
        baseline = None
        if self.realized_every and ctx.stage % self.realized_every == 0:
            baseline = self.realize(ctx, table)
        val = loop.task.score(loop.trainee.evaluated[id(loop.validator)].table.to_dict())
        self.rows.append({
            "key": list(key), **{k: v for k, v in self.head.items() if k != "key"},
            "stage": ctx.stage, "stages": ctx.stages_total,
            "messages": prompt["messages"], "prompt_tokens": prompt["tokens"],
            "prompt_cuts": prompt["cuts"], "current": editable_values(space, ctx.current),
            "cells": cells, "train_success": p, "validation_score": val,
            "diagnosis": diag, "diagnosis_rule": (
                f"training: the rules engineer's thresholds on training success (> {self.high}"
                f" too_easy, < {self.low} too_hard); weakest: F's lowest cell"),
            "moves": [{k: v for k, v in m.items() if k != "config"} for m in table],
            "best": self.scorer.choose(scores).index, "baseline": baseline,
            "seconds": {"table": round(t1 - t0, 3),
                        "realized": round(time.perf_counter() - t1, 3)}})

    def realize(self, ctx: Any, table: list[dict[str, Any]]) -> dict[str, float]:
        """Train one stage from the context's trainee state under the chosen moves' configs and
        the current one; writes each move's realized score and gain; returns the baseline's."""
        loop = self.loop
        order = sorted(range(len(table)), key=lambda i: -proxy(table[i]))
        picks = [order[0], order[-1]]
        rest = [i for i in order if i not in picks]
        rng = np.random.default_rng([loop.s.seed, 0xDA7A, ctx.stage])
        picks += [int(i) for i in rng.permutation(rest)[:max(0, self.realized_moves - 2)]]
        picks = list(dict.fromkeys(picks[:self.realized_moves]))

        def realized(values: Mapping[str, Any], first: int = 0) -> float:
            """The mean validation score after one stage under `values`, over
            `realized_keys` training keys (the first the loop's next stage's own)."""
            out = []
            for j in range(first, first + self.realized_keys):
                state, _ = loop.trainee._inner.train_stage(
                    loop.trainee.state, loop.space.to_config(values),
                    loop.key(ctx.stage + 1, 1 if j == 0 else 0x1000 + j))
                val = loop.trainee._inner.evaluate_split(state, loop.validator,
                                                         loop.key(ctx.stage + 1, 2))
                out.append(float(loop.task.score(val.table.to_dict())))
            return float(np.mean(out))

        base = realized(ctx.current)
        for i in picks:
            score = realized(table[i]["config"])
            table[i]["realized"] = {"score": score, "gain": score - base}
        out = {"score": base, "gain": base - base}
        if self.noise:  # the baseline again under another training key: the gains' noise
            out["repeat_score"] = realized(ctx.current, first=self.realized_keys)
        return out


# -------------------------------------------------------------------------- the runs
def seed_list(text: str, flag: str = "--seeds") -> list[int]:
    """'10-29,45' -> the seeds in order, each once; a part that is neither a seed nor a range
    ends the script in one line naming `flag`."""
    seeds: list[int] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        lo, _, hi = part.partition("-")
        try:
            seeds += list(range(int(lo), int(hi or lo) + 1))
        except ValueError:
            raise SystemExit(f"{flag}: {part!r} is not a seed or a range such as 10-29") from None
    return list(dict.fromkeys(seeds))


def parse_seeds(text: str) -> list[int]:
    """'10-29,50-54' -> the seeds; seeds 0-4 (evaluation) are refused."""
    seeds = seed_list(text)
    bad = sorted(set(seeds) & set(EVAL_SEEDS))
    if bad:
        raise SystemExit(f"--seeds: {bad} are reserved for evaluating engineers "
                         f"({EVAL_SEEDS.start}-{EVAL_SEEDS.stop - 1}); use 10-49 (train) "
                         f"and {HELDOUT_SEEDS.start}-{HELDOUT_SEEDS.stop - 1} (held out)")
    return seeds


def proposer_of(seed: int, mix: Sequence[str]) -> str:
    """The proposer of a seed's run: the mix in turn by seed (the same on every rerun)."""
    return mix[seed % len(mix)]


def settings_for(task: str, preset: str | None, proposer: str, seed: int,
                 budget: Mapping[str, Any]) -> Any:
    from designer.settings import RunSettings

    kw: dict[str, Any] = {"env": task, "engineer": proposer, "seed": seed,
                          "stages": budget["stages"], "stage_steps": budget["stage_steps"],
                          "trainee": dict(budget["trainee"]), "heldout_every": budget["stages"]}
    if preset is not None:
        kw["preset"] = preset
    if budget.get("verify_episodes") is not None:
        kw["verify"] = {"episodes": budget["verify_episodes"]}
    return RunSettings(**kw)


def run_seed(args: argparse.Namespace, seed: int, rows: Rows, budget: Mapping[str, Any]
             ) -> None:
    from designer.run.loop import ClosedLoop

    proposer = proposer_of(seed, args.mix)
    head = {"key": [args.task, seed, proposer], "task": args.task,
            "preset": args.preset if args.task == "mapf" else None, "seed": seed,
            "proposer": proposer, "split": "heldout" if seed in HELDOUT_SEEDS else "train"}
    if all((*head["key"], k) in rows for k in range(budget["stages"] - 1)):
        return
    s = settings_for(args.task, head["preset"], proposer, seed, budget)
    runs = Path(str(args.out) + ".runs")
    loop = ClosedLoop(s, runs / f"{args.task}_s{seed}_{proposer}", on_note=lambda m: None)
    loop.trainee = _Tap(loop.trainee)
    loop.engineer = Recording(loop.engineer, ContextRecorder(
        loop, rows, head=head, tokens=args.tokens, table_episodes=budget["table_episodes"],
        realized_every=args.realized_every, realized_moves=args.realized_moves,
        noise=args.noise, realized_keys=args.realized_keys))
    loop.run()


def machine() -> dict[str, Any]:
    import jax

    return {"platform": platform.platform(), "cpus": os.cpu_count(),
            "devices": [str(d) for d in jax.devices()], "node": platform.node()}


def write_meta(args: argparse.Namespace, seeds: Sequence[int], budget: Mapping[str, Any],
               wall_s: float | None, started: str) -> None:
    """The sidecar `<out>.meta.json`: one entry per invocation (a resume adds one)."""
    from designer.run.provenance import git_commit, versions

    path = Path(str(args.out) + ".meta.json")
    meta = json.loads(path.read_text()) if path.exists() else {"invocations": []}
    entry = {"command": [sys.executable, *sys.argv], "commit": git_commit(),
             "started": started, "wall_s": wall_s, "seeds": list(seeds),
             "proposers": {s: proposer_of(s, args.mix) for s in seeds},
             "budget": dict(budget), "realized_every": args.realized_every,
             "realized_moves": args.realized_moves, "realized_keys": args.realized_keys,
             "noise": args.noise, "tokens": args.tokens,
             "machine": machine(), "versions": versions()}
    inv = [e for e in meta["invocations"] if e["started"] != started]
    meta.update({"task": args.task, "preset": args.preset if args.task == "mapf" else None,
                 "invocations": [*inv, entry]})
    path.write_text(json.dumps(meta, indent=1) + "\n")


# ------------------------------------------------------------------------ the report
def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rank correlation (ties averaged); None under 3 pairs or a constant side."""
    from scipy.stats import spearmanr

    if len(x) < 3 or len(set(x)) < 2 or len(set(y)) < 2:
        return None
    return float(spearmanr(x, y).statistic)


def report(paths: Iterable[str | Path]) -> dict[str, Any]:
    """How well the verification proxy (`proxy`) predicts the realized gain, over the measured
    (context, move) pairs: Spearman overall and per task (with the count), and within
    contexts the share of measured move pairs the proxy orders as the realized gains do."""
    rows = [r for p in paths for r in read_rows(p)]
    pairs: dict[str, list[tuple[float, float]]] = {}
    raw: dict[str, list[tuple[float, float]]] = {}  # learnability alone, band or not
    agree = {"same": 0, "pairs": 0}
    for r in rows:
        missing = sorted({"task", "split", "baseline", "moves"} - r.keys())
        if missing:
            raise ValueError(f"row {r['key']}: not a scored row (no {', '.join(missing)})")
        try:
            measured = [(proxy(m), float(m["realized"]["gain"])) for m in r["moves"]
                        if m["realized"]]
            learn = [(float(m["score"]["learnability"]), float(m["realized"]["gain"]))
                     for m in r["moves"] if m["realized"]]
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"row {r['key']}: a move is not scored ({e.__class__.__name__}: "
                             f"{str(e)[:80]})") from None
        pairs.setdefault(r["task"], []).extend(measured)
        raw.setdefault(r["task"], []).extend(learn)
        for i, (a, ga) in enumerate(measured):
            for b, gb in measured[i + 1:]:
                if a != b and ga != gb:
                    agree["pairs"] += 1
                    agree["same"] += (a > b) == (ga > gb)

    def corr(ps: list[tuple[float, float]]) -> dict[str, Any]:
        return {"n": len(ps), "spearman": spearman([a for a, _ in ps], [g for _, g in ps])}

    every = [p for ps in pairs.values() for p in ps]
    return {"datasets": [dataset_info(p) for p in paths], "rows": len(rows),
            "contexts_by_task_split": {
                f"{t}/{s}": sum(r["task"] == t and r["split"] == s for r in rows)
                for t in sorted({r["task"] for r in rows}) for s in ("train", "heldout")},
            "moves": sum(len(r["moves"]) for r in rows),
            "realized_contexts": sum(r["baseline"] is not None for r in rows),
            "proxy_vs_realized": {"overall": corr(every),
                                  **{t: corr(ps) for t, ps in sorted(pairs.items())}},
            "learnability_vs_realized": {t: corr(ps) for t, ps in sorted(raw.items())},
            "noise": noise_floor(rows),
            "within_context_pair_agreement": {
                **agree, "share": agree["same"] / agree["pairs"] if agree["pairs"] else None}}


def noise_floor(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Where baselines were trained twice (`--noise`): the mean |difference| of the two scores
    (what one realized measurement varies by under another training key) beside the mean
    |realized gain| of the moves measured in the same contexts."""
    twice = [r for r in rows if r["baseline"] and "repeat_score" in r["baseline"]]
    gains = [abs(m["realized"]["gain"]) for r in twice for m in r["moves"] if m["realized"]]
    diffs = [abs(r["baseline"]["repeat_score"] - r["baseline"]["score"]) for r in twice]
    return {"contexts": len(twice),
            "mean_abs_repeat_diff": float(np.mean(diffs)) if diffs else None,
            "mean_abs_gain": float(np.mean(gains)) if gains else None}


def dataset_info(path: str | Path) -> dict[str, Any]:
    """One dataset file's provenance from its sidecar: the generating commands, commit, seeds,
    budget, machine and wall time, with the file's size."""
    meta_path = Path(str(path) + ".meta.json")
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {"invocations": []}
    inv = meta["invocations"]
    last = inv[-1] if inv else {}
    return {"path": str(path), "bytes": Path(path).stat().st_size, "task": meta.get("task"),
            "preset": meta.get("preset"), "commands": [" ".join(e["command"]) for e in inv],
            "commit": last.get("commit"), "seeds": last.get("seeds"),
            "budget": last.get("budget"), "realized_every": last.get("realized_every"),
            "realized_moves": last.get("realized_moves"), "machine": last.get("machine"),
            "wall_s": sum(e["wall_s"] or 0.0 for e in inv),
            "unfinished_invocations": sum(e["wall_s"] is None for e in inv)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", choices=sorted(BUDGETS), default="mapf")
    ap.add_argument("--preset", choices=("paper", "open"), default="paper",
                    help="MAPF's preset of editable knobs")
    ap.add_argument("--seeds", default="10-49",
                    help="seeds, e.g. 10-29,50-54: training contexts from 10-49, held-out "
                         "contexts from 50-54; 0-4 are reserved for evaluating engineers "
                         "and refused")
    ap.add_argument("--mix", default=",".join(MIX),
                    help=f"proposers by seed in turn, of {', '.join(PROPOSERS)} (llm: the "
                         "base model, slow on a CPU)")
    ap.add_argument("--out", type=Path, help="the JSONL (keep it outside the repository)")
    ap.add_argument("--stages", type=int, help="stages per run (default: the task's budget)")
    ap.add_argument("--stage-steps", type=int, help="env steps per stage")
    ap.add_argument("--num-envs", type=int, help="the trainee's environments")
    ap.add_argument("--num-steps", type=int, help="the trainee's rollout length")
    ap.add_argument("--verify-episodes", type=int, help="the loop's verification episodes")
    ap.add_argument("--table-episodes", type=int, help="fresh levels per move in the table")
    ap.add_argument("--realized-every", type=int, default=2,
                    help="measure realized gains on every K-th stage (0: never)")
    ap.add_argument("--realized-moves", type=int, default=3,
                    help="moves measured per such stage: proxy best, worst, then random")
    ap.add_argument("--realized-keys", type=int, default=1,
                    help="training keys each realized score is averaged over")
    ap.add_argument("--noise", action="store_true",
                    help="train each realized context's baseline twice (another training "
                         "key): the realized gains' noise floor")
    ap.add_argument("--tokens", choices=("model", "approx"), default="model",
                    help="prompt token count: SmolLM2's tokenizer, or the estimate")
    ap.add_argument("--report", nargs="+", metavar="JSONL",
                    help="report proxy vs realized gain for these files, then exit")
    ap.add_argument("--json", type=Path, help="with --report: also write the report here")
    args = ap.parse_args(argv)
    if args.report:
        try:
            out = report(args.report)
        except ValueError as e:
            raise SystemExit(f"--report: {e}") from None
        from designer.run.provenance import git_commit

        out = {"command": " ".join([sys.executable, *sys.argv]), "commit": git_commit(),
               "seeds": {d["path"]: d["seeds"] for d in out["datasets"]},
               "machine": next((d["machine"] for d in out["datasets"] if d["machine"]), None),
               **out}
        print(json.dumps(out, indent=1))
        if args.json:
            args.json.write_text(json.dumps(out, indent=1) + "\n")
        return 0
    if args.out is None:
        ap.error("--out is required (or --report)")
    args.mix = [m.strip() for m in args.mix.split(",") if m.strip()]
    if not args.mix or set(args.mix) - set(PROPOSERS):
        ap.error(f"--mix takes proposers of {', '.join(PROPOSERS)}, got {args.mix}")
    if args.realized_moves < 1 or args.realized_every < 0 or args.realized_keys < 1:
        ap.error("--realized-moves and --realized-keys must be >= 1, --realized-every >= 0")
    seeds = parse_seeds(args.seeds)
    budget = copy.deepcopy(BUDGETS[args.task])
    for flag, where in (("stages", None), ("stage_steps", None), ("num_envs", "trainee"),
                        ("num_steps", "trainee"), ("verify_episodes", None),
                        ("table_episodes", None)):
        if getattr(args, flag) is not None:
            (budget[where] if where else budget)[flag] = getattr(args, flag)
    if "pool_size" in budget["trainee"]:
        budget["trainee"]["pool_size"] = budget["trainee"]["num_envs"]
    started, t0 = time.strftime("%Y-%m-%dT%H:%M:%S%z"), time.perf_counter()
    try:
        rows = Rows(args.out)
    except (OSError, ValueError) as e:
        raise SystemExit(f"--out: {e}") from None
    write_meta(args, seeds, budget, None, started)
    for seed in seeds:
        run_seed(args, seed, rows, budget)
        print(f"seed {seed}: {len(rows.keys)} rows", flush=True)
    write_meta(args, seeds, budget, round(time.perf_counter() - t0, 1), started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
