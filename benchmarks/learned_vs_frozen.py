"""Learned vs frozen engineer (`--learn` against the frozen `llm`): verification scores and
held-out result.

    python benchmarks/learned_vs_frozen.py --frozen runs/frozen/llm --learned runs/learned/llm \
        --json benchmarks/results/learned_vs_frozen_cartpole.json

Each folder holds one run per seed (``seed0``, ``seed1``, ...: what ``envengineer compare
--engineers llm [--learn]`` writes). Per arm and stage: the mean learnability of the
proposals that verification scored and that of the chosen one (the quantity the choice rule
maximises inside its [floor, ceiling] window), the share of proposals inside the window (the
learning engineer's reward is 0 outside it), and the final held-out headline of each run
(success % for a control family, valid % for MAPF; mean ± std over seeds). Seeds present in
only one arm, and runs not finished, are left out. Reads the run folders only, each once
(`designer.report.load_run`).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from harness import command, write_json

from designer.tasks.report import Run, load_run


def stage_scores(run: Run) -> list[dict[str, Any]]:
    """Per proposing stage: the proposals' scores and the chosen one's."""
    verify = run.settings["verify"]
    out = []
    for stage in sorted((run.path / "stages").iterdir()):
        cands_file = stage / "candidates.json"
        if not cands_file.is_file():
            continue
        cands = json.loads(cands_file.read_text())
        if not cands:
            continue
        choice = json.loads((stage / "choice.json").read_text())
        scores = [c["score"] for c in cands]
        ps = [s.get("p", s["success"]) for s in scores]  # the signal the window reads
        inside = [verify["floor"] <= p <= verify["ceiling"] for p in ps]
        chosen = choice.get("index")
        out.append({"stage": int(stage.name),
                    "p": [round(p, 4) for p in ps],
                    "mean_learnability": statistics.mean(s["learnability"] for s in scores),
                    "chosen_learnability": scores[chosen]["learnability"]
                    if chosen is not None else None,
                    "inside_window": sum(inside) / len(inside)})
    return out


def heldout(run: Run) -> float:
    """The last stage's held-out headline: success % (control) or valid % (MAPF)."""
    overall = run.stages[-1]["heldout_overall"]
    return float(overall["success"] if "success" in overall else overall["valid"])


def _mean(xs: Any) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.mean(xs) if xs else None


def finished_runs(root: Path) -> dict[str, Run]:
    """seed folder name -> run, for the runs whose every stage is finished (a run still going,
    or not started, is left out); each run folder is read once (`designer.report.load_run`)."""
    out = {}
    for path in sorted(root.glob("seed*")):
        try:
            run = load_run(path)
        except ValueError:  # not a run folder yet, or no finished stage
            continue
        if len(run.stages) >= run.settings["stages"]:
            out[path.name] = run
    return out


def summarise(arms: dict[str, Path]) -> dict[str, Any]:
    found = {arm: finished_runs(root) for arm, root in arms.items()}
    seeds = sorted(set.intersection(*(set(f) for f in found.values())))
    result: dict[str, Any] = {"seeds": seeds, "arms": {}}
    for arm, fin in found.items():
        runs = {s: {"heldout_success": heldout(fin[s]), "stages": stage_scores(fin[s])}
                for s in seeds}
        finals = [r["heldout_success"] for r in runs.values()]
        per_stage = [r["stages"] for r in runs.values()]
        result["arms"][arm] = {
            "runs": runs,
            "heldout_mean": statistics.mean(finals),
            "heldout_std": statistics.stdev(finals) if len(finals) > 1 else 0.0,
            # stages 1 on: stage 0's proposals are the same for both arms (same prompt, seed)
            "mean_learnability_after_0": _mean(
                st["mean_learnability"] for stages in per_stage for st in stages[1:]),
            "chosen_learnability_after_0": _mean(
                st["chosen_learnability"] for stages in per_stage for st in stages[1:]),
            "inside_window_after_0": _mean(
                st["inside_window"] for stages in per_stage for st in stages[1:]),
        }
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frozen", type=Path, required=True)
    ap.add_argument("--learned", type=Path, required=True)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    res = summarise({"frozen": a.frozen, "learned": a.learned})
    print(f"seeds: {', '.join(res['seeds'])}")
    print("| arm | held-out success or valid % (mean ± std) | per seed "
          "| mean learnability, stages 1+ | chosen learnability, stages 1+ "
          "| share inside the window, stages 1+ |")
    print("|---|---|---|---|---|---|")
    for arm, r in res["arms"].items():
        per = ", ".join(f"{v['heldout_success']:.1f}" for v in r["runs"].values())
        cells = [r[k] for k in ("mean_learnability_after_0", "chosen_learnability_after_0",
                                "inside_window_after_0")]
        print(f"| {arm} | {r['heldout_mean']:.1f} ± {r['heldout_std']:.1f} | {per} | "
              + " | ".join("-" if c is None else f"{c:.3f}" for c in cells) + " |")
    write_json(a.json, res, command=command(__file__, argv), seeds=res["seeds"])
    return res


if __name__ == "__main__":
    main()
