"""MAPF-FrozenLake's report: `report.md` and PNG plots a researcher can trust.

`write_mapf_report(runs, out)` (through `designer.report.write_report`) writes:
- the paper-style table on the **held-out** split of each run's result (the stage chosen on
  validation, `designer.run.selection`; the final stage for runs with `select = "last"`):
  valid % / optimal % by agents 3/4/5 (mean over map sizes), mean ± std over seeds, beside the
  paper's rows; the same table at the final stage where the two differ; and per engineer the
  agents x map size table (mean ± std over seeds);
- `heldout_curve.png`: held-out valid % against training env steps and wall time;
- `configs.png`: the size mix and mean hole / wait ratios chosen per stage, per engineer;
- `failures.png`: failure causes per stage on the validation split, per engineer;
- `stage_time.png`: where a stage's time goes, per engineer;
- `selection.png`: valid % + optimal % per stage on the validation split (which chooses the
  run's result) and on the held-out split, per engineer and seed, the chosen stage ringed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from designer.tasks.mapf.task import score
from designer.tasks.report import (
    PANELS_PER_ROW,
    Run,
    engineering_table,
    group,
    heldout_curve_plot,
    mean_std,
    panel_grid,
    save_figure,
    selection_lines,
    stage_bars_plot,
    stage_time_plot,
    time_table,
    write_markdown,
)
from jaxenv.mapf.benchmark.heldout import AGENT_SIZES
from jaxenv.mapf.rules import CAUSES

PAPER = {  # valid % / optimal %, mean over map sizes, for 3 / 4 / 5 agents
    "paper: Qwen3-4B + GRPO, fixed random config": [(40.42, 26.08), (26.67, 16.10),
                                                    (15.11, 9.11)],
    "paper: Qwen3-4B + GRPO + engineer": [(51.67, 31.67), (33.14, 21.33), (18.67, 11.00)],
}
AGENTS = tuple(str(a) for a in AGENT_SIZES)  # the held-out split's agent counts



def summary_table(runs: list[Run], pick: str = "result") -> list[str]:
    """The paper's layout: valid % / optimal % by agents (mean over sizes) per engineer, of
    each run's result (`pick="result"`) or of its final stage (`pick="final"`)."""
    rows = ["| engineer | seeds | 3 agents | 4 agents | 5 agents | train env steps | "
            "verification episodes |", "|---|---|---|---|---|---|---|"]
    for name, cells in PAPER.items():
        rows.append(f"| {name} | - | " + " | ".join(f"{v:.2f} / {o:.2f}" for v, o in cells)
                    + " | - | - |")
    for label, rs in group(runs).items():
        finals = [getattr(r, pick) for r in rs if getattr(r, pick) is not None]
        cells = []
        for k in AGENTS:
            v = [f["mean_over_sizes"][k]["valid"] for f in finals if k in f["mean_over_sizes"]]
            o = [f["mean_over_sizes"][k]["optimal"] for f in finals if k in f["mean_over_sizes"]]
            cells.append(f"{mean_std(v)} / {mean_std(o)}")
        steps = mean_std([r.stages[-1]["env_steps"] for r in rs]).split(" ±")[0]
        ver = sum(sum(s["times"].get("verify_episodes", 0) for s in r.stages) for r in rs)
        rows.append(f"| **{label}** | {len(rs)} | " + " | ".join(cells)
                    + f" | {float(steps):,.0f} | {ver // max(len(rs), 1):,} per run |")
    return rows


def _by_agents(table: dict[str, Any], key: str) -> list[float]:
    """A held-out table's `key` % per agent count (mean over sizes; nan where missing)."""
    return [float(table["mean_over_sizes"].get(k, {}).get(key, float("nan"))) for k in AGENTS]


def cost_table(runs: list[Run]) -> list[str]:
    """Optimal % counted by makespan (the paper's case study) and by sum of costs, per agent
    count, mean ± std over seeds; empty where no table has the sum-of-costs count."""
    if not any("optimal_soc" in c for r in runs if r.result
               for c in r.result["mean_over_sizes"].values()):
        return []
    rows = ["| engineer | " + " | ".join(f"{k} agents: makespan / sum of costs" for k in AGENTS)
            + " |", "|---" * (len(AGENTS) + 1) + "|"]
    for label, rs in group(runs).items():
        res = [r.result for r in rs if r.result is not None]
        cells = [f"{mean_std([_by_agents(h, 'optimal')[i] for h in res])} / "
                 f"{mean_std([_by_agents(h, 'optimal_soc')[i] for h in res])}"
                 for i in range(len(AGENTS))]
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    return ["Held-out optimal % by makespan and by sum of costs (mean over map sizes, mean ± "
            "std over seeds)", "", *rows, ""]


def paired_table(runs: list[Run], base: str = "fixed") -> list[str]:
    """Each engineer minus `base` on the same seed (valid, optimal by makespan and by sum of
    costs, per agent count): mean ± std of the paired differences and the seeds paired."""
    groups = group(runs)
    if base not in groups or len(groups) < 2:
        return []
    ref = {r.settings["seed"]: r.result for r in groups[base] if r.result is not None}
    keys = [("valid", "valid"), ("optimal", "optimal (makespan)"),
            ("optimal_soc", "optimal (sum of costs)")]
    rows = ["| engineer | seeds | " + " | ".join(f"{k} agents: " + " / ".join(
        n for _, n in keys) for k in AGENTS) + " |", "|---" * (len(AGENTS) + 2) + "|"]
    for label, rs in groups.items():
        if label == base:
            continue
        pairs = [(r.result, ref[r.settings["seed"]]) for r in rs
                 if r.result is not None and r.settings["seed"] in ref]
        cells = [" / ".join(mean_std([_by_agents(a, key)[i] - _by_agents(b, key)[i]
                                      for a, b in pairs]) for key, _ in keys)
                 for i in range(len(AGENTS))]
        rows.append(f"| {label} | {len(pairs)} | " + " | ".join(cells) + " |")
    return [f"Paired differences against `{base}` (same seed; held-out, mean over map sizes, "
            "mean ± std over seeds)", "", *rows, ""]


def final_stage_table(runs: list[Run]) -> list[str]:
    """The summary table at the final stage, where some run's result is an earlier stage."""
    if all(r.result_stage in (None, len(r.stages) - 1) for r in runs):
        return []
    return ["### The same runs at their final stage", "", *summary_table(runs, "final"), ""]


def size_tables(runs: list[Run]) -> list[str]:
    out = []
    for label, rs in group(runs).items():
        finals = [r.result for r in rs if r.result is not None]
        if not finals:
            continue
        sizes = sorted({int(s) for f in finals for d in f["by_size"].values() for s in d})
        out += [f"#### {label}: held-out valid % / optimal % by agents x map size "
                f"({len(finals)} seed(s))", "",
                "| agents | " + " | ".join(f"{s}×{s}" for s in sizes) + " |",
                "|---" * (len(sizes) + 1) + "|"]
        for k in AGENTS:
            cells = []
            for s in sizes:
                v = [f["by_size"][k][str(s)]["valid"] for f in finals
                     if str(s) in f["by_size"].get(k, {})]
                o = [f["by_size"][k][str(s)]["optimal"] for f in finals
                     if str(s) in f["by_size"].get(k, {})]
                cells.append(f"{mean_std(v)} / {mean_std(o)}" if v else "-")
            out.append(f"| {k} | " + " | ".join(cells) + " |")
        out.append("")
    return out


def _mean_valid(h: dict[str, Any]) -> float:
    """A MAPF held-out table's valid %, mean over agents 3/4/5 and map sizes."""
    return float(np.mean([h["mean_over_sizes"][k]["valid"] for k in AGENTS
                          if k in h["mean_over_sizes"]]))


def _failure_counts(rs: list[Run]) -> np.ndarray:
    """[stages, causes] failed validation episodes per stage and cause, mean over seeds."""
    counts = np.zeros((len(rs[0].validation), len(CAUSES) - 1))
    for r in rs:
        for i, v in enumerate(r.validation[:len(counts)]):
            by = v["failures"]["causes_by_size"]
            counts[i] += [sum(d.get(c, 0) for d in by.values()) for c in CAUSES[1:]]
    return counts / len(rs)


def plots(runs: list[Run], out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    groups = group(runs)
    names = [heldout_curve_plot(groups, out, _mean_valid,
                                ylabel="held-out valid % (mean over 3/4/5 agents and sizes)",
                                title="Held-out split: valid % during training")]

    n = len(groups)
    cols, rows = min(n, PANELS_PER_ROW), -(-n // PANELS_PER_ROW)  # engineers wrap after 4
    fig, axes = plt.subplots(2 * rows, cols, figsize=(3.6 * cols, 6.4 * rows), squeeze=False)
    for j, (label, rs) in enumerate(groups.items()):
        top, bot = axes[2 * (j // cols), j % cols], axes[2 * (j // cols) + 1, j % cols]
        r = rs[0]
        w = np.array([s["values"]["size_weights"] for s in r.stages])
        sizes = [str(3 + i) for i in range(w.shape[1])]
        top.stackplot(range(len(w)), w.T, labels=[f"{s}×{s}" for s in sizes])
        top.set_title(f"{label}\nsize mix (seed {r.settings['seed']})", fontsize=8)
        top.set_xlabel("stage")
        top.set_ylim(0, 1)
        for key, style in (("hole_ratio", "-"), ("wait_ratio", "--")):
            v = np.array([np.dot(s["values"][key], s["values"]["size_weights"])
                          for s in r.stages])
            bot.plot(v, style, marker="o", ms=3, label=f"{key} (size-weighted)")
        bot.set_ylim(0, 1)
        bot.set_xlabel("stage")
        for ax in (top, bot):
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        bot.grid(alpha=0.3)
    for j in range(n, rows * cols):
        axes[2 * (j // cols), j % cols].axis("off")
        axes[2 * (j // cols) + 1, j % cols].axis("off")
    axes[0, cols - 1].legend(fontsize=6, loc="center left", bbox_to_anchor=(1.0, 0.5))
    axes[1, cols - 1].legend(fontsize=7)
    names.append(save_figure(fig, out, "configs.png"))
    names.append(stage_bars_plot(groups, out, "failures.png", _failure_counts, CAUSES[1:],
                                 title="{label}\nvalidation failures per stage",
                                 ylabel="failed episodes (mean over seeds)", height=3.4))
    names.append(stage_time_plot(groups, out))
    if any(r.selected for r in runs):
        names.append(selection_plot(groups, out))
    return names


def _headline_sum(table: dict[str, Any] | None) -> float:
    """The MAPF selection score of a table (`designer.tasks.mapf.task.score`); NaN if
    skipped."""
    return float("nan") if table is None else score(table)


def selection_plot(groups: dict[str, list[Run]], out: Path) -> str:
    """`selection.png`: per engineer and seed, valid % + optimal % per stage on the validation
    split (solid: what chooses) and on the held-out split (dashed: what is reported), the
    chosen stage ringed: whether the choice holds up on levels it never saw."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.ticker import MaxNLocator

    fig, axes, flat = panel_grid(len(groups), 3.8, 3.4, sharey=True)
    for ax, (label, rs) in zip(flat, groups.items()):
        for i, r in enumerate(rs):
            c = f"C{i}"
            val = [_headline_sum(v["table"]) for v in r.validation]
            held = [_headline_sum(h) for h in r.heldout]
            ax.plot(val, "-", color=c, marker="o", ms=3, label=f"seed {r.settings['seed']}")
            ax.plot(held, "--", color=c, lw=1)
            if r.result_stage is not None:
                ax.plot([r.result_stage], [val[r.result_stage]], "o", ms=10, mfc="none",
                        color=c)
        ax.set_title(label, fontsize=8)
        ax.set_xlabel("stage")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    for ax in axes[:, 0]:
        ax.set_ylabel("valid % + optimal % (whole split)")
    fig.suptitle("Which stage is the run's result: solid, the validation split (it chooses); "
                 "dashed, the held-out split; ring, the chosen stage", fontsize=8)
    return save_figure(fig, out, "selection.png")


def write_mapf_report(runs: list[Run], out: Path, *, title: str, command: str | None) -> Path:
    """`report.md` and its PNGs in `out` for runs of MAPF (see the module docstring)."""
    pngs = plots(runs, out)
    body = ["## Held-out split (never read by any engineer): each run's result, mean over "
            "map sizes", "", *selection_lines(runs, "valid % + optimal %"),
            "valid % / optimal % (mean ± std over seeds)", "", *summary_table(runs), "",
            *cost_table(runs), *paired_table(runs), "## What the engineers proposed", "",
            *engineering_table(runs), "", *final_stage_table(runs), *size_tables(runs),
            "## Time per stage", "",
            "Wall-clock seconds per stage (mean over stages and seeds). Verification is "
            "counted apart from training; `propose` holds the LLM calls, or the "
            "`learnability` engineer's own scoring of its sampled configs. Runs that shared "
            "the machine with other jobs show longer times in every phase.", "",
            *time_table(runs), ""]
    return write_markdown(runs, out, title=title, command=command, body=body, pngs=pngs)
