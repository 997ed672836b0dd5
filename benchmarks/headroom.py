"""Headroom: what the best static config gains over `fixed` at the loop's default budget.

Before asking an engineer to beat `fixed` by a margin, measure the margin that exists. Each
static config is a closed-loop run of the `fixed` engineer started from that config
(`ClosedLoop(first=...)`), at the `RunSettings` defaults (stages, env steps per stage, trainee,
verification; only the held-out split is evaluated once, for the chosen stage, since no
engineer reads it). The set spans the config space:

- `fixed`: the space's default config (the paired baseline);
- `round0_s<k>`: round 0's random config of seed k (`designer.run.loop.round0_values`);
- extremes derived from the `ConfigSpace` alone (`extremes`), the other knobs at their
  defaults: a per-key or scalar number all at its low / high bound; a simplex with all mass
  spread over its first / last half of keys (small / large maps, few / many agents); the
  ranges of `X_min` / `X_max` pairs all narrow around nominal, widest, shifted low and
  shifted high; a bool or choice at each other value;
- `dr` (domain randomisation), a run rather than a config: it draws a new config every stage.

Every config trains with the same seeds. The best static config is chosen on the
**validation** score of each run's chosen stage (`Task.score`, averaged over seeds); its
held-out numbers are then set against `fixed`'s, paired by seed. Each finished (config, seed)
run is appended to a JSONL beside the JSON and skipped when the benchmark is run again; an
interrupted run resumes from its run folder's last finished stage.

    python benchmarks/headroom.py --task mapf --preset paper \\
        --json benchmarks/results/headroom_mapf_paper.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import command, commit, write_json

OPEN_CAPACITY = {"max_agents": 5}  # the open preset mixes 1 to 5 agents (at 2 it mixes 1 and 2)
RANGE_ENDS = ("_min", "_max")  # a knob pair that bounds a range drawn per episode
NARROW = 0.1  # a narrow range: nominal +- this share of the knob's bounds
# Extremes at a knob's high end (more mass on later keys, higher numbers, wider ranges) run
# first: the loop's stages grow too easy after a few (training success near its ceiling), so
# the high end is where a static config most likely gains.
HIGH_END = ("_high", "_last_half", "_wide")


@dataclass(frozen=True)
class Arm:
    """One entry of the set: a static config (`fixed` started from `values`) or an engineer's
    run (`values` None: the loop's own round 0)."""

    name: str
    kind: str  # default | random | extreme | run
    engineer: str = "fixed"
    values: Mapping[str, Any] | None = None


# --------------------------------------------------------------------------- the set
def range_pairs(space: Any) -> list[tuple[str, str]]:
    """The editable (`X_min`, `X_max`) knob pairs of `space`: ranges drawn per episode."""
    names = set(space.editable_names())
    lo, hi = RANGE_ENDS
    return [(n, n[:-len(lo)] + hi) for n in space.editable_names()
            if n.endswith(lo) and n[:-len(lo)] + hi in names]


def _snap(knob: Any, x: float) -> float | int:
    """`x` clipped to the knob's bounds and moved to its nearest grid value."""
    grid = knob.grid()
    return min(grid, key=lambda g: abs(g - min(max(x, knob.low), knob.high)))


def _ranges(space: Any, pairs: Sequence[tuple[str, str]]) -> dict[str, dict[str, Any]]:
    """Every range at once: narrow around nominal, widest, shifted low, shifted high."""
    out: dict[str, dict[str, Any]] = {"narrow": {}, "wide": {}, "low": {}, "high": {}}
    for a, b in pairs:
        ka, kb = space[a], space[b]
        nominal = 0.5 * (float(ka.default) + float(kb.default))
        half = NARROW * (ka.high - ka.low)
        for shape, (x, y) in {"narrow": (nominal - half, nominal + half),
                              "wide": (ka.low, ka.high), "low": (ka.low, nominal),
                              "high": (nominal, ka.high)}.items():
            out[shape][a], out[shape][b] = _snap(ka, x), _snap(kb, y)
    return out


def _half(keys: Sequence[str], last: bool) -> list[float]:
    """Weights with all mass spread evenly over the first or last half of `keys` (the middle
    key of an odd count in both)."""
    n = len(keys)
    chosen = range(n // 2, n) if last else range(0, -(-n // 2))
    return [1.0 / len(chosen) if i in chosen else 0.0 for i in range(n)]


def extremes(space: Any) -> list[tuple[str, dict[str, Any]]]:
    """Hand-designed extremes along each editable knob family, derived from `space` alone (see
    the module docstring); each a full valid config, none equal to the default."""
    default = space.default()
    pairs = range_pairs(space)
    in_pair = {n for p in pairs for n in p}
    edits: list[tuple[str, dict[str, Any]]] = []
    for k in space.knobs:
        if not k.editable or k.name in in_pair:
            continue
        n = len(k.keys) if k.is_vector else 1
        if k.kind == "simplex":
            edits += [(f"{k.name}_first_half", {k.name: _half(k.keys, last=False)}),
                      (f"{k.name}_last_half", {k.name: _half(k.keys, last=True)})]
        elif k.kind in ("float", "int"):
            for end, x in (("low", k.low), ("high", k.high)):
                x = int(x) if k.kind == "int" else float(x)
                edits.append((f"{k.name}_{end}", {k.name: [x] * n if k.is_vector else x}))
        elif k.kind == "bool":
            edits.append((f"{k.name}_{not k.default}".lower(), {k.name: not k.default}))
        else:
            edits += [(f"{k.name}_{c}", {k.name: c}) for c in k.choices if c != k.default]
    if pairs:
        edits += [(f"ranges_{shape}", edit) for shape, edit in _ranges(space, pairs).items()]
    out = []
    for name, edit in edits:
        values = space.validate({**default, **edit})
        if values != default:
            out.append((name, values))
    return out


def arms(space: Any, random_seeds: Sequence[int], knobs: Sequence[str] | None = None
         ) -> list[Arm]:
    """The whole set, in the order it runs (a study cut short by time keeps its head):
    `fixed`, the extremes at a knob's high end (`HIGH_END`), `dr`, the other extremes, then
    round 0's random configs. `knobs`: extremes of these knob families only (an extreme's
    name starts with its knob's)."""
    from designer.run.loop import round0_values

    chosen = [(n, v) for n, v in extremes(space)
              if knobs is None or any(n.startswith(k) for k in knobs)]
    high = [Arm(n, "extreme", values=v) for n, v in chosen if n.endswith(HIGH_END)]
    low = [Arm(n, "extreme", values=v) for n, v in chosen if not n.endswith(HIGH_END)]
    out = [Arm("fixed", "default", values=space.default()), *high,
           Arm("dr", "run", engineer="dr"), *low]
    out += [Arm(f"round0_s{k}", "random", values=round0_values(space, k)) for k in random_seeds]
    return out


# ------------------------------------------------------------------------ the numbers
def numbers(task: str, table: Mapping[str, Any]) -> dict[str, float]:
    """A held-out table's headline numbers: MAPF valid % and optimal % overall and per agent
    count (mean over map sizes, as the paper reports); control success % and normalised
    return."""
    if task == "mapf":
        out = {f"{m}": float(table["overall"][m]) for m in ("valid", "optimal")}
        for agents, cell in table["mean_over_sizes"].items():
            out.update({f"{m}_{agents}": float(cell[m]) for m in ("valid", "optimal")})
        return out
    o = table["overall"]
    return {"success": float(o["success"]), "normalized_return": float(o["normalized_return"])}


def paired_headroom(best: Mapping[int, Mapping[str, float]],
                    fixed: Mapping[int, Mapping[str, float]]) -> dict[str, dict[str, Any]]:
    """Per headline number: best minus fixed on each seed both ran, and their mean and
    standard deviation (None for one seed)."""
    seeds = sorted(set(best) & set(fixed))
    if not seeds:
        raise ValueError("no seed that both the best config and fixed ran: nothing to pair")
    out = {}
    for name in best[seeds[0]]:
        diff = {s: best[s][name] - fixed[s][name] for s in seeds}
        d = list(diff.values())
        out[name] = {"mean": statistics.fmean(d),
                     "std": statistics.stdev(d) if len(d) > 1 else None,
                     "per_seed": {str(s): v for s, v in diff.items()}}
    return out


def summarise(task: str, arms_run: Sequence[Arm], records: Sequence[Mapping[str, Any]],
              seeds: Sequence[int]) -> dict[str, Any]:
    """Per config its runs; the best static config on mean validation score over the seeds
    (only configs that ran every seed compete); its held-out numbers against `fixed`'s."""
    by: dict[str, dict[int, Mapping[str, Any]]] = {}
    for r in records:
        by.setdefault(r["config"], {})[int(r["seed"])] = r
    configs = []
    for arm in arms_run:
        runs = by.get(arm.name, {})
        done = sorted(runs)
        val = [runs[s]["validation_score"] for s in done]
        configs.append({"name": arm.name, "kind": arm.kind, "engineer": arm.engineer,
                        "values": None if arm.values is None else dict(arm.values),
                        "seeds": done,
                        "validation": {str(s): runs[s]["validation_score"] for s in done},
                        "validation_mean": statistics.fmean(val) if val else None,
                        "heldout": {str(s): runs[s]["heldout"] for s in done},
                        "heldout_mean": _mean_numbers([runs[s]["heldout"] for s in done]),
                        "chosen_stage": {str(s): runs[s]["stage"] for s in done},
                        "wall_s": {str(s): runs[s]["wall_s"] for s in done}})
    full = [c for c in configs if c["engineer"] == "fixed" and len(c["seeds"]) == len(seeds)]
    fixed = next((c for c in configs if c["name"] == "fixed"), None)
    out: dict[str, Any] = {"configs": configs, "fixed": fixed, "best_static": None,
                           "headroom": None, "dr_vs_fixed": None}
    if not full or fixed is None or len(fixed["seeds"]) != len(seeds):
        return out
    best = max(full, key=lambda c: c["validation_mean"])
    per_seed = lambda c: {int(s): h for s, h in c["heldout"].items()}  # noqa: E731
    out["best_static"] = {"name": best["name"], "config": best["values"],
                          "validation": best["validation"],
                          "validation_mean": best["validation_mean"],
                          "heldout": best["heldout"], "heldout_mean": best["heldout_mean"]}
    out["headroom"] = paired_headroom(per_seed(best), per_seed(fixed))
    dr = next((c for c in configs if c["name"] == "dr" and c["seeds"]), None)
    if dr is not None:
        out["dr_vs_fixed"] = paired_headroom(per_seed(dr), per_seed(fixed))
    return out


def _mean_numbers(rows: Sequence[Mapping[str, float]]) -> dict[str, float] | None:
    if not rows:
        return None
    return {k: statistics.fmean(r[k] for r in rows) for k in rows[0]}


# ---------------------------------------------------------------------------- the runs
def settings(task: str, preset: str | None, engineer: str, seed: int, quick: bool) -> Any:
    """The run's `RunSettings`: the loop's defaults (`--quick`: a tiny budget that only checks
    the pipeline), held-out evaluated for the chosen stage only."""
    from designer.settings import RunSettings

    kw: dict[str, Any] = {"env": task, "engineer": engineer, "seed": seed}
    if task == "mapf":
        kw["preset"] = preset
        if preset == "open":
            kw["capacity"] = OPEN_CAPACITY
    elif preset is not None:
        raise ValueError(f"--preset {preset} applies to mapf only (task {task} has one space)")
    if quick:
        kw.update(stages=2, stage_steps=2 * 64 * 32,
                  trainee={"num_envs": 64, "num_steps": 32, "pool_size": 64},
                  verify={"episodes": 16})
    stages = kw.get("stages", RunSettings.model_fields["stages"].default)
    return RunSettings(**kw, heldout_every=stages)


def budget_of(s: Any) -> dict[str, Any]:
    """The training budget of a run's settings: stages x env steps per stage (whole PPO
    updates of envs x rollout steps), the same for every config."""
    t = s.trainee
    return {"stages": s.stages, "stage_steps_asked": s.stage_steps,
            "stage_steps": s.num_updates * t.num_envs * t.num_steps,
            "num_envs": t.num_envs, "num_steps": t.num_steps, "num_updates": s.num_updates}


def run_arm(arm: Arm, seed: int, task: str, preset: str | None, quick: bool, out: Path
            ) -> dict[str, Any]:
    """One (config, seed) run to the end (resumed from `out` where it stopped): its chosen
    stage, validation score and held-out numbers."""
    from designer.run.loop import ClosedLoop

    s = settings(task, preset, arm.engineer, seed, quick)
    t = time.perf_counter()
    loop = ClosedLoop(s, out, first=None if arm.values is None else dict(arm.values))
    results = loop.run()
    sel = loop.selection
    stage_s = sum(v for r in results for k, v in r.times.items() if k != "verify_episodes")
    return {"config": arm.name, "seed": seed, "engineer": arm.engineer, "stage": sel["stage"],
            "validation_score": sel["scores"][sel["stage"]],
            "validation": sel["validation"], "heldout": numbers(task, sel["heldout"]),
            "budget": budget_of(s),
            "wall_s": round(stage_s, 1), "process_s": round(time.perf_counter() - t, 1),
            "run": str(out)}


def read_done(path: Path, budget: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The finished runs of `path` (JSONL); a torn last line is dropped with a note; a record of
    another budget stops the benchmark (a JSONL holds one study)."""
    if not path.is_file():
        return []
    out = []
    for i, line in enumerate(path.read_text().splitlines()):
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            print(f"note: {path}:{i + 1} is not a JSON line (a run cut off while writing): "
                  "ignored, that run runs again", file=sys.stderr)
            continue
        if r.get("budget") != budget:
            raise SystemExit(f"{path}:{i + 1} holds a run of another budget; use another --json")
        out.append(r)
    return out


def _hhmm(text: str) -> str:
    """`--stop-at`'s value, checked: HH:MM of a day."""
    h, _, m = text.partition(":")
    if not (h.isdigit() and m.isdigit() and int(h) < 24 and int(m) < 60):
        raise argparse.ArgumentTypeError(f"a UTC time HH:MM, got {text!r}")
    return text


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--task", default="mapf", help="mapf or a control family such as cartpole")
    p.add_argument("--preset", choices=("paper", "open"), default=None,
                   help="MAPF's editable knobs (default paper; open: also agent counts, "
                   "capacity 5 agents); a control family has one space and takes none")
    p.add_argument("--json", type=Path, default=None, help="summary JSON (a .jsonl beside it "
                   "holds the finished runs)")
    p.add_argument("--seeds", default="0,1", help="training seeds, the same for every config")
    p.add_argument("--random", default="0,1,2,3,4",
                   help="round-0 random configs of these seeds ('' for none)")
    p.add_argument("--knobs", default=None, help="extremes of these knob families only "
                   "(comma-separated name prefixes, e.g. size_weights,hole_ratio); default all")
    p.add_argument("--only", default=None, help="run only these configs (comma-separated "
                   "names); the summary still lists every finished one")
    p.add_argument("--runs", type=Path, default=Path("/tmp/headroom"),
                   help="where the run folders go")
    p.add_argument("--stop-at", default=None, type=_hhmm,
                   help="UTC time HH:MM: start no config whose "
                   "remaining seeds would end after it (judged by this study's last runs)")
    p.add_argument("--quick", action="store_true", help="a tiny budget: checks the pipeline")
    p.add_argument("--list", action="store_true", help="print the set and exit")
    return p.parse_args(argv)


def time_left(stop_at: str, records: Sequence[Mapping[str, Any]], runs: int) -> bool:
    """Whether `runs` more runs end before `stop_at` (UTC HH:MM today), each as long as the
    median of this study's last three (the first compiles what the others read from the
    cache); before any run, yes."""
    h, m = (int(x) for x in stop_at.split(":"))
    now = time.gmtime()
    left = (h * 60 + m) * 60 - (now.tm_hour * 3600 + now.tm_min * 60 + now.tm_sec)
    last = [max(r["process_s"], r["wall_s"]) for r in records[-3:]]
    return left > runs * (statistics.median(last) if last else 0.0)


def _ints(text: str, flag: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise SystemExit(f"{flag}: comma-separated integers, got {text!r}") from None


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    a = parse(argv)
    import jax

    from designer.tasks import make_task

    # Every run of a study compiles the same programs: compile them once.
    jax.config.update("jax_compilation_cache_dir", str(a.runs / "jax_cache"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)

    if a.task == "mapf" and a.preset is None:
        a.preset = "paper"
    seeds, cmd = _ints(a.seeds, "--seeds"), command(__file__, argv)
    if len(seeds) < 2:
        raise SystemExit("--seeds: name at least 2 seeds (the headroom is paired by seed)")
    try:
        base = settings(a.task, a.preset, "fixed", seeds[0], a.quick)
    except ValueError as e:  # pydantic's ValidationError is one: its first message
        raise SystemExit(f"--task/--preset: {e.errors()[0]['msg'] if hasattr(e, 'errors') else e}"
                         ) from None
    space = make_task(base).space
    knobs = None if a.knobs is None else [k for k in a.knobs.split(",") if k]
    names = [n for n, _ in extremes(space)]
    unmatched = [k for k in knobs or () if not any(n.startswith(k) for n in names)]
    if unmatched:
        families = sorted({k.name for k in space.knobs if k.editable})
        raise SystemExit(f"--knobs: {unmatched} name no editable knob of {a.task} "
                         f"({', '.join(families)})")
    todo = arms(space, _ints(a.random, "--random"), knobs)
    if a.list:
        for arm in todo:
            print(arm.name, json.dumps(arm.values))
        return {}
    only = None if a.only is None else set(a.only.split(","))
    unknown = sorted((only or set()) - {arm.name for arm in todo})
    if unknown:
        raise SystemExit(f"--only: no such config {unknown} (see --list)")
    tag = "_".join(x for x in (a.task, a.preset, "quick" if a.quick else None) if x)
    jsonl = None if a.json is None else a.json.with_suffix(".jsonl")
    budget = budget_of(base)
    records = read_done(jsonl, budget) if jsonl else []
    started = time.perf_counter()

    def write() -> dict[str, Any]:
        result = {"task": a.task, "preset": a.preset, "budget": budget, "seeds": seeds,
                  "command": cmd, "commit": commit()["commit"],
                  "wall_s": round(sum(r["wall_s"] for r in records), 1),
                  **summarise(a.task, todo, records, seeds)}
        write_json(a.json, result, command=cmd, seeds=seeds)
        return result

    for arm in todo:
        if only is not None and arm.name not in only:
            continue
        for seed in seeds:
            if any(r["config"] == arm.name and r["seed"] == seed for r in records):
                continue
            missing = [x for x in seeds if not any(
                r["config"] == arm.name and r["seed"] == x for r in records)]
            if a.stop_at is not None and not time_left(a.stop_at, records, len(missing)):
                print(f"stop: {arm.name}'s seeds {missing} would end after {a.stop_at} UTC",
                      flush=True)
                return write()
            t = time.perf_counter()
            r = run_arm(arm, seed, a.task, a.preset, a.quick,
                        a.runs / tag / arm.name / f"seed{seed}")
            records.append(r)
            if jsonl is not None:
                jsonl.parent.mkdir(parents=True, exist_ok=True)
                with jsonl.open("a") as f:
                    f.write(json.dumps(r) + "\n")
            print(f"{arm.name} seed {seed}: validation {r['validation_score']:.3f} "
                  f"heldout {json.dumps(r['heldout'])} ({time.perf_counter() - t:.0f} s, "
                  f"{time.perf_counter() - started:.0f} s in all)", flush=True)
            write()
    return write()


if __name__ == "__main__":
    main()
