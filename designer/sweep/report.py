"""What a sweep's trials left: each trial's state and result row, and the sweep's report.md.

A trial's run folder is the single source of truth: `is_finished` and `result_row` read it
(and the trial's `sweep/attempts.jsonl`) whatever became of Ray's state. The report puts the
sweep's tables (mean ± std per grid cell, the paper's context ablation, failed trials) before
`designer.report`'s sections over the finished runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from designer.run.folder import RunFolder
from designer.sweep.spec import SweepSpec
from designer.sweep.trials import ABLATION, ROUND0_FIELD, Trial, variant_of
from designer.tasks.mapf.report import AGENTS

ATTEMPTS = "sweep/attempts.jsonl"  # a trial's attempts, one JSON line each, in its run folder


def is_finished(run_dir: Path, stages: int) -> bool:
    """All the run's stages are done (or its last one is: a `train_minutes` budget ran out)."""
    folder = RunFolder(run_dir)
    done = folder.finished_stages()
    if not done:
        return False
    return len(done) >= stages or bool(folder.read_json(folder.stage_rel(done[-1])
                                                        / "done.json").get("last"))


def read_attempts(run_dir: Path) -> list[dict[str, Any]]:
    p = run_dir / ATTEMPTS
    if not p.is_file():
        return []
    return [json.loads(x) for x in p.read_text().splitlines() if x.strip()]


def result_row(t: Trial, out: Path, state: str) -> dict[str, Any]:
    """One line of results.jsonl: the trial's overrides, status and the held-out figures of
    its result (the stage `designer.run.selection` chose; the last stage of older runs)."""
    d = out / t.name
    folder = RunFolder(d)
    done = folder.finished_stages()
    last = folder.read_json(folder.stage_rel(done[-1]) / "done.json") if done else {}
    attempts = read_attempts(d)
    ok = is_finished(d, t.settings.stages)
    result = last  # a run saved before `designer.run.selection`: its last stage
    sel = folder.selection() if ok else None
    if sel:
        result = {"stage": sel["stage"], "heldout_by_agents": sel["heldout"].get(
            "mean_over_sizes"), "heldout_overall": sel["heldout"].get("overall")}
    return {"trial": t.name, "run_dir": str(d), "overrides": t.overrides, "cell": t.cell,
            "status": "finished" if ok else "failed", "skipped": state == "finished",
            "stages_done": len(done), "stages": t.settings.stages,
            "result_stage": result.get("stage") if ok else None,
            "env_steps": last.get("env_steps"),
            "heldout_by_agents": result.get("heldout_by_agents") if ok else None,
            "heldout_overall": result.get("heldout_overall") if ok else None,
            "wall_s": round(sum(a["wall_s"] for a in attempts), 2),
            "attempts": len(attempts), "retries": max(0, len(attempts) - 1),
            "error": None if ok else (attempts[-1]["error"] if attempts else "never started")}


def _ms(xs: list[float]) -> str:
    if not xs:
        return "-"
    if len(xs) == 1:
        return f"{xs[0]:.2f}"
    return f"{np.mean(xs):.2f} ± {np.std(xs, ddof=1):.2f}"


def _agent_values(rows: list[dict[str, Any]], k: str, metric: str) -> list[float]:
    return [r["heldout_by_agents"][k][metric] for r in rows
            if r["heldout_by_agents"] and k in r["heldout_by_agents"]]


def cell_table(rows: list[dict[str, Any]]) -> list[str]:
    """Mean ± std over each grid cell's finished trials (its seeds), held-out split."""
    cells: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        cells.setdefault(r["cell"], []).append(r)
    out = ["| cell | finished | " + " | ".join(f"{k} agents valid / optimal %" for k in AGENTS)
           + " | wall time per trial |", "|---" * (len(AGENTS) + 3) + "|"]
    for cell, rs in cells.items():
        ok = [r for r in rs if r["status"] == "finished"]
        vals = [f"{_ms(_agent_values(ok, k, 'valid'))} / {_ms(_agent_values(ok, k, 'optimal'))}"
                for k in AGENTS]
        wall = _ms([r["wall_s"] for r in ok]).split(" ±")[0]
        out.append(f"| {cell} | {len(ok)}/{len(rs)} | " + " | ".join(vals)
                   + f" | {wall}{'s' if ok else ''} |")
    return out


def ablation_tables(rows: list[dict[str, Any]], trials: list[Trial]) -> list[str]:
    """The paper's ablation layout: rows V1..V6, held-out valid % per agent count, one table
    per combination of the other varied settings. Empty unless the sweep varies the context."""
    by_name = {t.name: t for t in trials}
    if not any({"ablation", "context"} & set(t.overrides) for t in trials):
        return []
    groups: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for r in rows:
        t = by_name[r["trial"]]
        rest = ", ".join(f"{k}={v}" for k, v in t.overrides.items()
                         if k not in ("seed", "ablation", "context", ROUND0_FIELD))
        label = variant_of(t.settings) or f"context {t.settings.context}"
        groups.setdefault(rest, {}).setdefault(label, []).append(r)
    out = []
    for rest, variants in groups.items():
        out += [f"### Context ablation{': ' + rest if rest else ''}", "",
                "held-out valid % by agents (mean over map sizes; mean ± std over seeds)", "",
                "| variant | context | finished | " + " | ".join(f"{k} agents" for k in AGENTS)
                + " |", "|---" * (len(AGENTS) + 3) + "|"]
        labels = list(ABLATION) + sorted(v for v in variants if v not in ABLATION)
        for v in labels:
            rs = variants.get(v, [])
            ok = [r for r in rs if r["status"] == "finished"]
            ctx = ABLATION[v][2] if v in ABLATION else v.removeprefix("context ")
            cells = ([_ms(_agent_values(ok, k, "valid")) for k in AGENTS] if rs
                     else ["not in this sweep"] + ["-"] * (len(AGENTS) - 1))
            out.append(f"| {v if v in ABLATION else '-'} | {ctx} | {len(ok)}/{len(rs)} | "
                       + " | ".join(cells) + " |")
        out.append("")
    return out


def write_sweep_report(rows: list[dict[str, Any]], trials: list[Trial], out: Path,
                       spec: SweepSpec, command: str | None, wall_s: float) -> Path:
    """report.md: the sweep's tables first, then `designer.report` over the finished trials."""
    from designer.report import write_report

    title = f"Sweep {spec.name or out.name}"
    ok = [r for r in rows if r["status"] == "finished"]
    failed = [r for r in rows if r["status"] != "finished"]
    sections = [
        "## Sweep", "",
        f"{len(rows)} trials: {len(ok)} finished ({sum(r['skipped'] for r in ok)} before this "
        f"invocation), {len(failed)} failed; this invocation took {wall_s:.0f}s; the trials' "
        f"attempts took {sum(r['wall_s'] for r in rows):.0f}s in all. "
        "One line per trial in `results.jsonl`.", "",
        "### Mean ± std per grid cell (held-out split, final stage, mean over map sizes)", "",
        *cell_table(rows), "", *ablation_tables(rows, trials)]
    if failed:
        sections += ["### Failed trials", "", "| trial | stages done | attempts | last error |",
                     "|---|---|---|---|"]
        sections += [f"| {r['trial']} | {r['stages_done']}/{r['stages']} | {r['attempts']} | "
                     f"{(r['error'] or '').replace('|', '/')} |" for r in failed]
        sections.append("")
    if ok:
        path = write_report([out / r["trial"] for r in ok], out, title=title, command=command)
        text = path.read_text()
    else:
        path = out / "report.md"
        text = f"# {title}\n\n" + (f"Command: `{command}`\n" if command else "")
    head, sep, tail = text.partition("\n## ")  # the sweep's sections before the runs' ones
    body = "\n".join(sections)
    path.write_text(f"{head}\n{body}\n## {tail}" if sep else f"{text}\n{body}")
    return path
