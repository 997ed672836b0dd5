"""The report of runs on a control family (CartPole, Pendulum, ...): the robustness table.

`write_control_report(runs, out)` (called by `designer.report.write_report` for runs whose
`env` is a control family) writes `report.md` and:

- the held-out robustness table of each run's result (the stage chosen on validation,
  `designer.run.selection`, or the final stage): success % and mean normalised
  return over the family's frozen held-out variants (mean ± std over seeds), and per engineer
  the success % per parameter bin;
- `heldout_curve.png`: held-out success % against training env steps and wall time;
- `heatmap.png`: held-out success over two parameters (4 x 4 bins of the held-out variants),
  per engineer; the two parameters are those whose bins' success varies most over all runs;
- `ranges.png`: the training range of every parameter per stage (as a share of its knob
  bounds), per engineer: what the engineer did to the physics;
- `endings.png`: how validation episodes ended per stage, per engineer;
- `stage_time.png`: where a stage's time goes.

Every number of the tables comes from the held-out set, which no engineer reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from designer.tasks.report import (
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
from jaxenv.control.registry import family
from jaxenv.control.sets import HELDOUT, N_BINS, bin_edges, load_arrays


def _finals(rs: list[Run]) -> list[dict[str, Any]]:
    return [r.result for r in rs if r.result is not None]


def summary_table(runs: list[Run]) -> list[str]:
    rows = ["| engineer | seeds | success % | normalised return | train env steps | "
            "verification episodes |", "|---|---|---|---|---|---|"]
    for label, rs in group(runs).items():
        f = _finals(rs)
        steps = np.mean([r.stages[-1]["env_steps"] for r in rs])
        ver = sum(sum(s["times"].get("verify_episodes", 0) for s in r.stages) for r in rs)
        rows.append(f"| **{label}** | {len(rs)} | {mean_std([x['success'] for x in f])} | "
                    f"{mean_std([x['normalized_return'] for x in f])} | {steps:,.0f} | "
                    f"{ver // max(len(rs), 1):,} per run |")
    return rows


def paired_table(runs: list[Run], base: str = "fixed") -> list[str]:
    """Each engineer minus `base` on the same seed: held-out success % and normalised return,
    mean ± std of the paired differences."""
    groups = group(runs)
    if base not in groups or len(groups) < 2:
        return []
    ref = {r.settings["seed"]: r.result for r in groups[base] if r.result}
    rows = ["| engineer | seeds | success % | normalised return |", "|---|---|---|---|"]
    for label, rs in groups.items():
        if label == base:
            continue
        pairs = [(r.result, ref[r.settings["seed"]]) for r in rs
                 if r.result and r.settings["seed"] in ref]
        rows.append(f"| {label} | {len(pairs)} | "
                    + " | ".join(mean_std([a[k] - b[k] for a, b in pairs])
                                 for k in ("success", "normalized_return")) + " |")
    return [f"Paired differences against `{base}` (same seed, held-out)", "", *rows, ""]


def bin_tables(runs: list[Run], name: str) -> list[str]:
    fam = family(name)
    out = []
    for label, rs in group(runs).items():
        f = _finals(rs)
        if not f:
            continue
        out += [f"#### {label}: held-out success % by parameter bin ({len(f)} seed(s))", "",
                "| parameter | " + " | ".join(f"bin {b + 1}" for b in range(N_BINS)) + " |",
                "|---" * (N_BINS + 1) + "|"]
        for p in fam.params:
            rows = f[0]["by_param"][p.name]
            cells = [f"{rows[b]['value_lo']:.3g}-{rows[b]['value_hi']:.3g}: "
                     f"{mean_std([x['by_param'][p.name][b]['success'] for x in f])}"
                     for b in range(len(rows))]
            out.append(f"| {p.name} ({p.unit}) | " + " | ".join(cells) + " |")
        out.append("")
    return out


def _bins(name: str) -> np.ndarray:
    """[N, K] bin index of every held-out variant per parameter."""
    mult = load_arrays(name, HELDOUT)["multipliers"]
    fam = family(name)
    idx = np.zeros(mult.shape, int)
    for k, p in enumerate(fam.params):
        e = bin_edges(name, p.name)
        idx[:, k] = np.clip(np.searchsorted(e, mult[:, k], side="right") - 1, 0, N_BINS - 1)
    return idx


def heatmap_params(runs: list[Run], name: str) -> tuple[int, int]:
    """The two parameters whose bins' held-out success varies most over all runs' results."""
    fam = family(name)
    spread = []
    for p in fam.params:
        s = [row["success"] for r in runs if r.result for row in r.result["by_param"][p.name]]
        spread.append(float(np.nanstd(s)) if s else 0.0)
    a, b = np.argsort(spread)[::-1][:2]
    return int(min(a, b)), int(max(a, b))


def plots(runs: list[Run], out: Path, name: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fam = family(name)
    groups = group(runs)
    n = len(groups)
    names = [heldout_curve_plot(
        groups, out, lambda h: h["success"], top=100,
        ylabel=f"held-out success % ({fam.gym_id} variants)",
        title=f"{fam.gym_id}, held-out physics variants: success % during training")]

    i, j = heatmap_params(runs, name)
    idx = _bins(name)
    fig, axes, flat = panel_grid(n, 4.2, 3.4)
    ei, ej = (bin_edges(name, fam.params[k].name) * fam.params[k].nominal for k in (i, j))
    im = None
    for ax, (label, rs) in zip(flat, groups.items()):
        succ = np.mean([np.asarray(r.result["per_variant"]["success"], float)
                        for r in rs if r.result], 0)
        grid = np.full((N_BINS, N_BINS), np.nan)
        for a in range(N_BINS):
            for b in range(N_BINS):
                m = (idx[:, i] == a) & (idx[:, j] == b)
                if m.any():
                    grid[b, a] = 100 * succ[m].mean()
        im = ax.imshow(grid, origin="lower", vmin=0, vmax=100, cmap="viridis", aspect="auto")
        for a in range(N_BINS):
            for b in range(N_BINS):
                if grid[b, a] == grid[b, a]:
                    ax.text(a, b, f"{grid[b, a]:.0f}", ha="center", va="center", fontsize=7,
                            color="w" if grid[b, a] < 60 else "k")
        ax.set_xticks(range(N_BINS), [f"{ei[k]:.3g}-{ei[k + 1]:.3g}" for k in range(N_BINS)],
                      fontsize=6, rotation=20)
        ax.set_yticks(range(N_BINS), [f"{ej[k]:.3g}-{ej[k + 1]:.3g}" for k in range(N_BINS)],
                      fontsize=6)
        ax.set_xlabel(f"{fam.params[i].name} ({fam.params[i].unit})", fontsize=8)
        ax.set_ylabel(f"{fam.params[j].name} ({fam.params[j].unit})", fontsize=8)
        ax.set_title(f"{label}: held-out success %", fontsize=8)
    fig.subplots_adjust(wspace=0.55, hspace=0.6)
    if im is not None:
        fig.colorbar(im, ax=list(flat[:n]), shrink=0.8)
    fig.savefig(out / "heatmap.png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    names.append("heatmap.png")

    fig, axes, flat = panel_grid(n, 3.8, 3.2, sharey=True)
    for ax, (label, rs) in zip(flat, groups.items()):
        r = rs[0]
        for k, p in enumerate(fam.params):
            lo = np.array([min(s["values"][f"{p.name}_min"], s["values"][f"{p.name}_max"])
                           for s in r.stages])
            hi = np.array([max(s["values"][f"{p.name}_min"], s["values"][f"{p.name}_max"])
                           for s in r.stages])
            span = p.high - p.low
            xs = np.arange(len(lo)) + 0.08 * (k - len(fam.params) / 2)
            ax.vlines(xs, (lo - p.low) / span, (hi - p.low) / span, lw=3,
                      color=f"C{k}", label=p.name)
            ax.plot(xs, (lo - p.low) / span, "_", color=f"C{k}")
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("stage")
        ax.set_title(f"{label}: training ranges (seed {r.settings['seed']})", fontsize=8)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    for ax in axes[:, 0]:
        ax.set_ylabel("range within the knob bounds (0 low, 1 high)", fontsize=7)
    flat[n - 1].legend(fontsize=6)
    names.append(save_figure(fig, out, "ranges.png"))

    def endings(rs: list[Run]) -> np.ndarray:
        """[stages, outcomes] % of validation episodes per ending, mean over seeds."""
        st = min(len(r.validation) for r in rs)
        return 100 * np.mean([[[v["failures"]["endings"].get(o, 0.0) for o in fam.outcomes]
                               for v in r.validation[:st]] for r in rs], 0)

    names.append(stage_bars_plot(groups, out, "endings.png", endings, fam.outcomes,
                                 title="{label}: validation endings",
                                 ylabel="% of validation episodes", height=3.2))
    names.append(stage_time_plot(groups, out))
    return names


def write_control_report(runs: list[Run], out: Path, *, title: str,
                         command: str | None) -> Path:
    """`report.md` and its PNGs for runs of one control family (module docstring)."""
    name = runs[0].settings["env"]
    if any(r.settings["env"] != name for r in runs):
        raise ValueError("a report covers one environment family; got "
                         f"{sorted({r.settings['env'] for r in runs})}")
    fam = family(name)
    pngs = plots(runs, out, name)
    n_held = len(runs[0].result["per_variant"]["success"]) if runs[0].result else 0
    body = [f"## Held-out physics variants ({n_held}, never read by any engineer): "
            "each run's result", "", *selection_lines(runs, "mean normalised return"),
            f"Success: return >= {fam.success_threshold:g}. Normalised return: 0 at "
            f"{fam.return_range[0]:g}, 1 at {fam.return_range[1]:g}. Mean ± std over seeds.",
            "", *summary_table(runs), "", *paired_table(runs),
            "## What the engineers proposed", "", *engineering_table(runs), "",
            *bin_tables(runs, name),
            "## Time per stage", "", *time_table(runs), ""]
    return write_markdown(runs, out, title=title, command=command, body=body, pngs=pngs,
                          scope=f"{fam.gym_id}, ")
