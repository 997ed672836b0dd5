"""The report of one or many runs: `report.md` and PNG plots a researcher can trust.

`write_report(run_dirs, out)` reads finished run folders (`designer.run.folder`) and writes:

- the paper-style table on the **held-out** split of each run's result (the stage chosen on
  validation, `designer.run.selection`; the final stage for runs with `select = "last"`): valid % /
  optimal % by agents 3/4/5 (mean over map sizes), mean ± std over seeds, beside the paper's
  rows; the same table at the final stage where the two differ; and per engineer the agents x
  map size table (mean ± std over seeds);
- `heldout_curve.png`: held-out valid % against training env steps and against training wall
  time, per engineer (mean over seeds, the band is ± one std);
- `configs.png`: the size mix and mean hole / wait ratios chosen per stage, per engineer;
- `failures.png`: failure causes per stage on the validation split, per engineer;
- `stage_time.png`: where a stage's time goes (training, validation, held-out evaluation, the
  engineer's proposal, verification), per engineer;
- `selection.png`: valid % + optimal % per stage on the validation split (which chooses the
  run's result) and on the held-out split, per engineer and seed, the chosen stage ringed.

Runs on a control family get their own report (`designer.tasks.control.report`: the robustness
table, a success heatmap over two parameters, the training ranges per stage).

Verification rollouts are reported apart from the training budget. Every number of the
held-out table comes from the held-out split, which no engineer reads.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from designer.run.folder import PHASES, RunFolder
from jaxenv.mapf.benchmark.heldout import AGENT_SIZES
from jaxenv.mapf.rules import CAUSES

PAPER = {  # valid % / optimal %, mean over map sizes, for 3 / 4 / 5 agents
    "paper: Qwen3-4B + GRPO, fixed random config": [(40.42, 26.08), (26.67, 16.10),
                                                    (15.11, 9.11)],
    "paper: Qwen3-4B + GRPO + engineer": [(51.67, 31.67), (33.14, 21.33), (18.67, 11.00)],
}
PANELS_PER_ROW = 4  # engineers side by side in the per-engineer figures
AGENTS = tuple(str(a) for a in AGENT_SIZES)  # the held-out split's agent counts


@dataclass
class Run:
    path: Path
    settings: dict[str, Any]
    stages: list[dict[str, Any]]  # done.json of each finished stage
    heldout: list[dict[str, Any] | None]  # held-out table of each stage (None if skipped)
    validation: list[dict[str, Any]]
    selected: dict[str, Any] | None = None  # selected.json (a finished run's chosen stage)

    @property
    def label(self) -> str:
        s = self.settings
        if s["engineer"] != "llm":
            return s["engineer"]
        return f"llm ({s['roles']}, {s['context']})"

    @property
    def final(self) -> dict[str, Any] | None:
        """The held-out table of the last stage that has one."""
        return next((h for h in reversed(self.heldout) if h is not None), None)

    @property
    def result(self) -> dict[str, Any] | None:
        """The held-out table of the run's result: its chosen stage once the run is done,
        else (a run still going) the last table so far."""
        return self.selected["heldout"] if self.selected else self.final

    @property
    def result_stage(self) -> int | None:
        return self.selected["stage"] if self.selected else None


def load_run(path: str | Path) -> Run:
    """A run folder with at least one finished stage (else ValueError naming the folder)."""
    p = Path(path)
    if not (p / "run.json").exists():
        raise ValueError(f"{p} is not a run folder (no run.json)")
    settings = json.loads((p / "run.json").read_text())["settings"]
    stages, held, val = [], [], []
    k = 0
    while (p / "stages" / f"{k:03d}" / "done.json").exists():
        d = p / "stages" / f"{k:03d}"
        stages.append(json.loads((d / "done.json").read_text()))
        held.append(json.loads((d / "heldout.json").read_text())["table"])
        val.append(json.loads((d / "validation.json").read_text()))
        k += 1
    if not stages:
        raise ValueError(f"{p} has no finished stage yet")
    return Run(p, settings, stages, held, val, RunFolder(p).selection())


def _ms(xs: list[float]) -> str:
    xs = [x for x in xs if x == x]
    if not xs:
        return "-"
    if len(xs) == 1:
        return f"{xs[0]:.2f}"
    return f"{np.mean(xs):.2f} ± {np.std(xs, ddof=1):.2f}"


def group(runs: list[Run]) -> dict[str, list[Run]]:
    out: dict[str, list[Run]] = defaultdict(list)
    for r in runs:
        out[r.label].append(r)
    return dict(sorted(out.items()))


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
            cells.append(f"{_ms(v)} / {_ms(o)}")
        steps = _ms([r.stages[-1]["env_steps"] for r in rs]).split(" ±")[0]
        ver = sum(sum(s["times"].get("verify_episodes", 0) for s in r.stages) for r in rs)
        rows.append(f"| **{label}** | {len(rs)} | " + " | ".join(cells)
                    + f" | {float(steps):,.0f} | {ver // max(len(rs), 1):,} per run |")
    return rows


def selection_lines(runs: list[Run], score: str = "valid % + optimal %") -> list[str]:
    """Which stage each run handed back, and by which rule (`designer.run.selection`; `score`
    names the task's selection score)."""
    rules = sorted({r.selected["rule"] for r in runs if r.selected})
    if not rules:
        return ["Each run's final stage (no run has finished with a chosen stage).", ""]
    chosen = ", ".join(f"{r.label} seed {r.settings['seed']}: stage {r.result_stage}"
                       for r in runs if r.selected)
    return [f"A run's result is the stage chosen by rule {' / '.join(rules)} "
            f"(`validation`: the best validation score, {score}; `last`: the final "
            "stage). The held-out split never chooses. Chosen stages: " + chosen + ".", ""]


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
                cells.append(f"{_ms(v)} / {_ms(o)}" if v else "-")
            out.append(f"| {k} | " + " | ".join(cells) + " |")
        out.append("")
    return out


def time_table(runs: list[Run]) -> list[str]:
    rows = ["| engineer | " + " | ".join(PHASES) + " | total per stage |",
            "|---" * (len(PHASES) + 2) + "|"]
    for label, rs in group(runs).items():
        t = {p: np.mean([s["times"].get(p, 0.0) for r in rs for s in r.stages])
             for p in PHASES}
        rows.append(f"| {label} | " + " | ".join(f"{t[p]:.1f}s" for p in PHASES)
                    + f" | {sum(t.values()):.1f}s |")
    return rows


def _curves(rs: list[Run], x: str, score: Callable[[dict[str, Any]], float]
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A held-out score (`score` of a stage's held-out table) against x ("env_steps", else
    training wall time), mean/std over seeds."""
    ys, xs = [], []
    for r in rs:
        pts = [(s, h) for s, h in zip(r.stages, r.heldout) if h is not None]
        xx = np.cumsum([s["times"]["train"] for s in r.stages])
        idx = [s["stage"] for s, _ in pts]
        xs.append(np.array([s["env_steps"] for s, _ in pts], float) if x == "env_steps"
                  else xx[idx])
        ys.append(np.array([score(h) for _, h in pts]))
    n = min(len(y) for y in ys)
    y = np.stack([yy[:n] for yy in ys])
    return np.mean(np.stack([xx[:n] for xx in xs]), 0), y.mean(0), y.std(0)


def heldout_curve_plot(groups: dict[str, list[Run]], out: Path,
                       score: Callable[[dict[str, Any]], float], *, ylabel: str, title: str,
                       top: float | None = None) -> str:
    """`heldout_curve.png` (any family): a held-out score (`score` of a stage's held-out
    table) against training env steps and against training wall time, per engineer (mean over
    seeds, the band is ± one std); the y axis starts at 0 and ends at `top` if given."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), sharey=True)
    for ax, x, xl in ((axes[0], "env_steps", "training env steps"),
                      (axes[1], "train_s", "training wall time (s)")):
        for label, rs in groups.items():
            xs, m, sd = _curves(rs, x, score)
            ax.plot(xs, m, marker="o", ms=3, label=f"{label} (n={len(rs)})")
            ax.fill_between(xs, m - sd, m + sd, alpha=0.15)
        ax.set_xlabel(xl)
        ax.set_ylim(bottom=0, top=top)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(ylabel)
    axes[1].legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    return save_figure(fig, out, "heldout_curve.png")


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
    """The MAPF selection score of a table (`designer.tasks.mapf.score`); NaN if skipped."""
    from designer.tasks.mapf import score

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


def save_figure(fig: Any, out: Path, name: str) -> str:
    """Lays `fig` out tightly, writes it to `out / name` and closes it; returns `name`."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(out / name, dpi=110)
    plt.close(fig)
    return name


def panel_grid(n: int, width: float, height: float, **kw: Any) -> tuple[Any, Any, Any]:
    """One panel per engineer, `PANELS_PER_ROW` a row: (figure, axes [rows, cols], the axes
    flattened); panels beyond `n` are switched off."""
    import matplotlib.pyplot as plt

    cols, rows = min(n, PANELS_PER_ROW), -(-n // PANELS_PER_ROW)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False,
                             **kw)
    flat = axes.reshape(-1)
    for ax in flat[n:]:
        ax.axis("off")
    return fig, axes, flat


def stage_bars_plot(groups: dict[str, list[Run]], out: Path, name: str,
                    values: Callable[[list[Run]], np.ndarray], labels: Sequence[str], *,
                    title: str, ylabel: str, height: float) -> str:
    """`name` (any family): one panel per engineer of stacked bars per stage, `values(runs)`
    [stages, len(labels)] (e.g. validation failures per cause, mean over seeds); `title` is
    formatted with the engineer's `label`."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.ticker import MaxNLocator

    n = len(groups)
    fig, axes, flat = panel_grid(n, 3.6, height, sharey=True)
    for ax, (label, rs) in zip(flat, groups.items()):
        v = values(rs)
        bottom = np.zeros(len(v))
        for c, lab in enumerate(labels):
            ax.bar(range(len(v)), v[:, c], bottom=bottom, label=lab)
            bottom += v[:, c]
        ax.set_title(title.format(label=label), fontsize=8)
        ax.set_xlabel("stage")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    for ax in axes[:, 0]:
        ax.set_ylabel(ylabel)
    flat[n - 1].legend(fontsize=7)
    return save_figure(fig, out, name)


def stage_time_plot(groups: dict[str, list[Run]], out: Path) -> str:
    """`stage_time.png`: mean seconds per stage and phase, per engineer (any family)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(groups)
    fig, ax = plt.subplots(figsize=(max(5, 1.4 * n + 2), 3.6))
    bottom = np.zeros(n)
    for p in PHASES:
        v = np.array([np.mean([s["times"].get(p, 0.0) for r in rs for s in r.stages])
                      for rs in groups.values()])
        ax.bar(range(n), v, bottom=bottom, label=p)
        bottom += v
    ax.set_xticks(range(n), list(groups), rotation=20, fontsize=7, ha="right")
    ax.set_ylabel("seconds per stage (mean)")
    ax.legend(fontsize=7)
    ax.set_title("Where a stage's time goes", fontsize=9)
    return save_figure(fig, out, "stage_time.png")


def write_report(run_dirs: list[str | Path], out: str | Path, *, title: str = "EnvEngineer",
                 command: str | None = None) -> Path:
    """`report.md` and its PNGs in `out` from the run folders (see the module docstring)."""
    runs = [load_run(d) for d in run_dirs]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if runs[0].settings.get("env", "mapf") != "mapf":  # a control family: robustness report
        from designer.tasks.control.report import write_control_report

        return write_control_report(runs, out, title=title, command=command)
    pngs = plots(runs, out)
    body = ["## Held-out split (never read by any engineer): each run's result, mean over "
            "map sizes", "", *selection_lines(runs),
            "valid % / optimal % (mean ± std over seeds)", "", *summary_table(runs), "",
            *final_stage_table(runs), *size_tables(runs),
            "## Time per stage", "",
            "Wall-clock seconds per stage (mean over stages and seeds). Verification is "
            "counted apart from training; `propose` holds the LLM calls, or the "
            "`learnability` engineer's own scoring of its sampled configs. Runs that shared "
            "the machine with other jobs show longer times in every phase.", "",
            *time_table(runs), ""]
    return write_markdown(runs, out, title=title, command=command, body=body, pngs=pngs)


def write_markdown(runs: list[Run], out: Path, *, title: str, command: str | None,
                   body: list[str], pngs: list[str], scope: str = "") -> Path:
    """`out/report.md` (any family): the title, the command, the budget (after `scope`, e.g.
    the family's name), the family's own `body` lines, the plots and the list of runs."""
    s0 = runs[0].settings
    lines = [f"# {title}", ""]
    if command:
        lines += [f"Command: `{command}`", ""]
    lines += [f"{scope}{len(runs)} run(s); budget per run: {s0['stages']} stages x "
              f"{s0['stage_steps']:,} env steps (training), the same for every engineer. "
              "Verification rollouts are counted apart.", "", *body,
              *[f"![{p}]({p})" for p in pngs], "",
              "## Runs", "", *[f"- `{r.path}`: {r.label}, seed {r.settings['seed']}, "
                              f"{len(r.stages)} stage(s)" for r in runs], ""]
    path = out / "report.md"
    path.write_text("\n".join(lines))
    return path
