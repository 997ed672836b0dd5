"""What every family's report builds on: a finished run folder read (`Run`, `load_run`) and
the parts all reports share (the time table, the held-out curve, per-engineer panels, the
stage-time plot, `report.md` itself). Verification rollouts are reported apart from the
training budget; every number of a held-out table comes from the held-out split, which no
engineer reads.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from designer.run.folder import PHASES, RunCorrupt, RunFolder

PANELS_PER_ROW = 4  # engineers side by side in the per-engineer figures


@dataclass
class Run:
    path: Path
    settings: dict[str, Any]
    stages: list[dict[str, Any]]  # done.json of each finished stage
    heldout: list[dict[str, Any] | None]  # held-out table of each stage (None if skipped)
    validation: list[dict[str, Any]]
    selected: dict[str, Any] | None = None  # selected.json (a finished run's chosen stage)
    budget: dict[str, Any] | None = None  # run.json's budget (`designer.run.provenance.budget`)
    candidates: list[list[dict[str, Any]]] | None = None  # candidates.json of each stage

    @property
    def label(self) -> str:
        s = self.settings
        if s["engineer"] != "llm":
            return s["engineer"]
        from designer.engineer.moves import edit_language

        language = edit_language(s.get("edits", "values"), s.get("backend", "transformers"))
        adapter = s.get("adapter", "none")  # a trained engineer is not pooled with its base
        tail = "" if adapter == "none" else f", adapter {Path(adapter).stem}"
        return f"llm ({s['roles']}, {s['context']}, {language}{tail})"

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
    """A run folder with at least one finished stage, every file verified against the
    stage's digests and checked on its schema (`designer.run.folder`); else ValueError
    (`RunCorrupt`) naming the folder or the file and field."""
    f = RunFolder(path)
    run_json = f.run_json()
    settings = run_json["settings"]
    for key in ("engineer", "seed", "stages", "stage_steps"):
        if key not in settings:
            raise RunCorrupt(f"{f.name('run.json')}: settings.{key}: Field required")
    stages, held, val, cands = [], [], [], []
    for k in f.finished_stages():
        rel = f.stage_rel(k)
        stages.append(f.verify_stage(k))
        held.append(f.read(rel / "heldout.json")["table"])
        val.append(f.read(rel / "validation.json"))
        cands.append(f.read(rel / "candidates.json"))
    if not stages:
        raise ValueError(f"{f.path} has no finished stage yet")
    budget = run_json.get("budget") if isinstance(run_json.get("budget"), dict) else None
    return Run(f.path, settings, stages, held, val, f.selection(), budget, cands)


def distinct_runs(run_dirs: Sequence[str | Path], note: Callable[[str], None] | None = None
                  ) -> list[Path]:
    """`run_dirs` with each folder once (a folder given twice is one run, not two seeds;
    `note` says which were dropped)."""
    seen: dict[Path, Path] = {}
    for d in run_dirs:
        real = Path(d).resolve()
        if real in seen:
            if note:
                note(f"{d} is the same run folder as {seen[real]}: counted once")
            continue
        seen[real] = Path(d)
    return list(seen.values())


def check_distinct(runs: list[Run]) -> None:
    """ValueError where two folders hold the same engineer and seed with the same settings
    (copies of one run): a report would count them as two seeds."""
    seen: dict[str, Path] = {}
    for r in runs:
        key = json.dumps(r.settings, sort_keys=True, default=str)
        if key in seen:
            raise ValueError(f"{r.path} and {seen[key]} hold the same run ({r.label}, seed "
                             f"{r.settings['seed']}, the same settings): report one of them")
        seen[key] = r.path


def mean_std(xs: list[float]) -> str:
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


def engineering_table(runs: list[Run]) -> list[str]:
    """What each engineer proposed: candidates per run, the share that equal the config
    they edit (no-ops: verification distance 0) and the distinct configs trained per run."""
    rows = ["| engineer | runs | candidates per run | no-op % | distinct configs trained "
            "per run |", "|---|---|---|---|---|"]
    for label, rs in group(runs).items():
        dist = [c.get("score", {}).get("distance") for r in rs for st in r.candidates or []
                for c in st]
        dist = [d for d in dist if isinstance(d, int | float)]
        noop = f"{100.0 * sum(d == 0 for d in dist) / len(dist):.1f}" if dist else "-"
        distinct = [len({json.dumps(st["values"], sort_keys=True, default=str)
                         for st in r.stages if "values" in st}) for r in rs]
        rows.append(f"| {label} | {len(rs)} | {len(dist) / max(len(rs), 1):.1f} | {noop} | "
                    f"{mean_std([float(d) for d in distinct])} |")
    return rows


def selection_lines(runs: list[Run], score: str) -> list[str]:
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


def budget_lines(runs: list[Run]) -> list[str]:
    """The training budget per run as it ran: stages x env steps a stage trained, and why
    that differs from the `--stage-steps` asked for (e.g. whole PPO updates)."""
    s0 = runs[0].settings
    ran = {(r.budget or {}).get("stage_steps") or r.stages[-1]["env_steps"] // len(r.stages)
           for r in runs}
    per = ran.pop() if len(ran) == 1 else None
    asked = s0["stage_steps"]
    what = f"{asked:,} (asked; the runs differ)" if per is None else f"{per:,}"
    first = (f"budget per run: {s0['stages']} stages x {what} env steps (training), the same "
             "for every engineer. Verification rollouts are counted apart.")
    if per is None or per == asked:
        return [first]
    why = next((r.budget["why"] for r in runs if r.budget and r.budget.get("why")), None)
    t = s0.get("trainee")
    if why is None and isinstance(t, dict) and {"num_envs", "num_steps"} <= set(t):
        why = f"rounded to whole PPO updates of {t['num_envs']} envs x {t['num_steps']} steps"
    return [first, "", f"Each stage trained {per:,} env steps where `--stage-steps` asked for "
            f"{asked:,}: {why or 'the trainee budget per stage'}."]


def fallback_lines(runs: list[Run]) -> list[str]:
    """Which stages an LLM engineer did not design: it fell back to the `rules` engineer
    (a dead server, a timeout, unusable replies), and why."""
    rows = [(r, s) for r in runs for s in r.stages if s.get("fallback")]
    llm = [r for r in runs if r.settings.get("engineer") in ("llm", "self")]
    if not llm and not rows:
        return []
    if not rows:
        return ["## Engineer fallbacks", "", "None: the LLM engineer designed every stage "
                "it was asked to.", ""]
    lines = ["## Engineer fallbacks", "", f"{len(rows)} stage(s) were designed by the `rules` "
             "engineer because the LLM engineer could not answer:", ""]
    lines += [f"- {r.label} seed {r.settings['seed']}, stage {s['stage']}: "
              f"{' '.join(str(s['fallback']).split())[:200]}" for r, s in rows]
    return [*lines, ""]


def write_markdown(runs: list[Run], out: Path, *, title: str, command: str | None,
                   body: list[str], pngs: list[str], scope: str = "") -> Path:
    """`out/report.md` (any family): the title, the command, the budget as it ran (after
    `scope`, e.g. the family's name), the engineer's fallbacks, the family's own `body`
    lines, the plots and the list of runs."""
    lines = [f"# {title}", ""]
    if command:
        lines += [f"Command: `{command}`", ""]
    first, *rest = budget_lines(runs)
    lines += [f"{scope}{len(runs)} run(s); {first}", *rest, "", *fallback_lines(runs), *body,
              *[f"![{p}]({p})" for p in pngs], "",
              "## Runs", "", *[f"- `{r.path}`: {r.label}, seed {r.settings['seed']}, "
                              f"{len(r.stages)} stage(s)" for r in runs], ""]
    path = out / "report.md"
    path.write_text("\n".join(lines))
    return path
