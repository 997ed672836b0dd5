"""Throughput scaling against batch size and device count, with compile time and memory per env.

    python benchmarks/scaling.py --quick --json runs/scaling.json --png runs/scaling.png
    python benchmarks/scaling.py --max-batch 1048576 --json scaling_h200.json --png scaling.png

How it measures: docs/benchmarks.md, "How `benchmarks/scaling.py` measures".
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import harness

WORKLOADS = ("env", "train", "verify")
ROW = "ROW "  # prefix of a worker's result lines on stdout
UNAVAILABLE = "unavailable"


@dataclass(frozen=True)
class Settings:
    """Everything a worker needs; recorded in the JSON."""

    size: int = 10
    agents: int = 2
    density: float = 0.3
    view_radius: int = 3
    max_steps: int = 128
    env_budget: int = 1 << 20  # env-steps per timed env-only run: scan = budget / B in [16, 256]
    rollout: int = 32  # train (policy.Hparams defaults): steps per update
    updates: int = 10  # train: updates per stage
    epochs: int = 2
    minibatches: int = 4
    pool_size: int = 1024  # train: levels per stage (at most B)
    hidden: int = 32
    verify_k: int = 8  # verify: candidates; episodes per candidate = B / k
    repeats: int = 3
    max_run_s: float = 30.0


# ----------------------------------------------------------------------------- measurement
def _timed(first: Callable[[], Any], again: Callable[[int], Any], repeats: int) -> dict:
    """Compile and first-call time of `first()`, then the median of `again(i)` runs."""
    with harness.CompileClock() as clock:
        first_s = harness.time_call(first)[1].wall_s
    runs = harness.time_rounds({"run": again}, repeats, warmup=False)["run"]
    return {"compile_s": clock.seconds, "first_call_s": first_s,
            "run_s": runs.median_s, "runs_s": runs.wall_s}


def _compiled_bytes(compiled: Any) -> int | None:
    """XLA's estimate of the device memory a program needs, or None where it has none."""
    try:
        m = compiled.memory_analysis()
    except Exception:  # not every backend implements it
        return None
    if m is None:
        return None
    return int(m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes
               - m.alias_size_in_bytes)


def _device_memory(device: Any) -> dict | None:
    stats = device.memory_stats()
    if not stats or "peak_bytes_in_use" not in stats:
        return None
    return {"peak_bytes": int(stats["peak_bytes_in_use"]),
            "limit_bytes": int(stats.get("bytes_limit", 0)) or None}


def _rates(row: dict, env_steps: int, agents: int) -> dict:
    row["env_steps_per_run"] = env_steps
    row["agent_steps_per_run"] = env_steps * agents
    row["env_steps_per_s"] = env_steps / row["run_s"]
    row["agent_steps_per_s"] = env_steps * agents / row["run_s"]
    return row


# ------------------------------------------------------------------------------- workloads
def _env_and_config(s: Settings) -> tuple[Any, Any, dict]:
    from jaxenv.mapf import Capacity, MAPFFrozenLake

    cap = Capacity(max_size=s.size, max_agents=s.agents, view_radius=s.view_radius,
                   max_steps=s.max_steps, label_waits=s.size <= 10)
    env = MAPFFrozenLake(cap)
    v = harness.full_size_values(env.config_space, s.agents, s.density)
    return env, env.config_space.to_config(v), v


def _scan_steps(s: Settings, batch: int) -> int:
    return int(min(256, max(16, s.env_budget // batch)))


def _env_program(env: Any, cfg: Any, s: Settings, batch: int, devices: Sequence[Any]):
    """Env-only stepping over `devices` (shard_map; per-env keys from the global env index)."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec as P

    from jaxenv.levels import make_pool
    from jaxenv.wrappers import PoolReset
    from policy.sharding import AXIS, env_mesh

    penv = PoolReset(env)
    pool = jax.jit(lambda k: make_pool(env, k, cfg, min(1024, batch)))(jax.random.key(0))
    mesh = env_mesh(devices)
    d = mesh.devices.size
    b, steps = batch // d, _scan_steps(s, batch)

    def run(pool: Any, key: jax.Array) -> jax.Array:
        gid = jax.lax.axis_index(AXIS) * b + jnp.arange(b)
        keys = lambda k: jax.vmap(jax.random.fold_in, (None, 0))(k, gid)  # noqa: E731
        params = harness.batch_pool(pool, b)
        params = params.replace(cfg=params.cfg.replace(slip_prob=0.2 * gid / batch))
        obs, state = harness.pool_reset(penv, params, keys(key))
        _, view_sum, total = harness.random_rollout(
            harness.pool_step(penv, params), obs, state, key, steps, env_keys=keys,
            actions=harness.uniform_actions(b, s.agents, env.num_actions),
            read=lambda obs, _: obs.view.astype(jnp.float32).sum())
        return jax.lax.psum(total + view_sum, AXIS)

    fn = jax.jit(jax.shard_map(run, mesh=mesh, in_specs=(P(), P()), out_specs=P(),
                               check_vma=False))
    return fn, pool, steps


def measure_env(s: Settings, batch: int, devices: Sequence[Any]) -> dict:
    import jax

    env, cfg, _ = _env_and_config(s)
    fn, pool, steps = _env_program(env, cfg, s, batch, devices)
    key = jax.random.key(1)
    box: dict = {}

    def first():
        box["c"] = fn.lower(pool, key).compile()
        return box["c"](pool, key)

    row = _timed(first, lambda i: box["c"](pool, jax.random.fold_in(key, i)), s.repeats)
    row.update(scan_steps=steps, compiled_bytes=_compiled_bytes(box["c"]))
    return _rates(row, batch * steps, s.agents)


def measure_train(s: Settings, batch: int, devices: Sequence[Any], sharded: bool) -> dict:
    import jax

    from policy import ActorCritic, Hparams, make_train
    from policy.sharding import sharded_stage

    env, cfg, _ = _env_and_config(s)
    hp = Hparams(num_envs=batch, num_steps=s.rollout, num_updates=s.updates,
                 update_epochs=s.epochs, num_minibatches=s.minibatches,
                 pool_size=min(s.pool_size, batch))
    trainer = make_train(env, ActorCritic(hidden=s.hidden), hp)
    stage = sharded_stage(trainer, devices) if sharded else trainer.train_stage
    runner = trainer.init(jax.random.key(0))
    key = jax.random.key(1)
    box: dict = {}

    def first():
        box["c"] = stage.lower(runner, cfg, key).compile()
        return box["c"](runner, cfg, key)

    row = _timed(first, lambda i: box["c"](runner, cfg, jax.random.fold_in(key, i)),
                 s.repeats)
    row.update(updates=hp.num_updates, rollout=hp.num_steps, pool_size=hp.pool_size,
               compiled_bytes=_compiled_bytes(box["c"]))
    return _rates(row, hp.num_updates * hp.steps_per_update, s.agents)


def measure_verify(s: Settings, batch: int) -> dict:
    import jax
    import numpy as np

    from designer.run.scoring import CandidateScorer
    from policy import ActorCritic, init_params

    env, _, values = _env_and_config(s)
    network = ActorCritic(hidden=s.hidden)
    k = s.verify_k
    verifier = CandidateScorer(env, network, k=k, episodes=batch // k)
    n_sizes = len(values["size_weights"])
    top = verifier.space["hole_ratio"].high
    cands = [dict(values, hole_ratio=[round(min(top, 0.05 * i), 2)] * n_sizes)
             for i in range(k)]
    params = init_params(network, verifier.evaluator.env, jax.random.key(0))
    key = jax.random.key(1)
    score = lambda i: verifier.score(params, cands, values, jax.random.fold_in(key, i))  # noqa: E731
    row = _timed(lambda: score(0), score, s.repeats)
    # The episodes' real lengths: the same first chunk as `score` plays, untimed.
    res = verifier.evaluator(params, verifier.space.stack(cands), jax.random.fold_in(
        jax.random.fold_in(key, 1), 0), n_per_config=batch // k)
    steps = int(np.asarray(res.steps).sum())
    row.update(candidates=k, episodes=batch, episodes_per_s=batch / row["run_s"],
               mean_episode_len=steps / batch, compiled_bytes=None)
    return _rates(row, steps, s.agents)


# --------------------------------------------------------------------------------- workers
def _meta() -> dict:
    import jax
    import jaxlib

    d = jax.devices()[0]
    return {"backend": d.platform, "device_kind": d.device_kind, "device_count": jax.device_count(),
            "jax": jax.__version__, "jaxlib": jaxlib.__version__,
            "memory_stats": UNAVAILABLE if _device_memory(d) is None else "memory_stats"}


def _emit(row: dict) -> None:
    print(ROW + json.dumps(row), flush=True)


def _out_of_memory(e: Exception) -> bool:
    text = f"{type(e).__name__}: {e}"
    return "RESOURCE_EXHAUSTED" in text or "out of memory" in text.lower()


def worker(spec: dict) -> None:
    """Run one sweep in this process and print its rows (see the module docstring)."""
    import jax

    s = Settings(**spec["settings"])
    _emit({"meta": _meta()})
    if spec["kind"] == "batch":
        dev = jax.devices()[0]
        per_env = None
        for b in spec["batches"]:
            mem = _device_memory(dev)
            if per_env and mem and mem["limit_bytes"] and per_env * b > 0.9 * mem["limit_bytes"]:
                _emit({"batch": b, "error": f"skipped: predicted {per_env * b / 2**30:.1f} GiB "
                                            f"> 90% of {mem['limit_bytes'] / 2**30:.1f} GiB"})
                break
            try:
                if spec["workload"] == "env":
                    row = measure_env(s, b, [dev])
                elif spec["workload"] == "train":
                    row = measure_train(s, b, [dev], sharded=False)
                else:
                    row = measure_verify(s, b)
            except Exception as e:  # an OOM or backend limit ends this sweep, not the others
                _emit({"batch": b, "error": ("out of memory: " if _out_of_memory(e) else "")
                       + f"{type(e).__name__}: {str(e)[:300]}"})
                break
            mem = _device_memory(dev)
            row.update(batch=b, devices=1, peak_bytes=mem["peak_bytes"] if mem else UNAVAILABLE)
            if mem:
                row["peak_bytes_per_env"] = per_env = mem["peak_bytes"] / b
                row["limit_bytes"] = mem["limit_bytes"]
            if row["compiled_bytes"] is not None:
                row["compiled_bytes_per_env"] = row["compiled_bytes"] / b
            _emit(row)
            if row["run_s"] > s.max_run_s:
                break
    else:
        d, b = spec["devices"], spec["batch"]
        devs = jax.devices()[:d]
        if len(devs) < d:
            _emit({"devices": d, "error": f"only {len(devs)} devices"})
            return
        for name in spec["workloads"]:
            try:
                row = (measure_env(s, b, devs) if name == "env"
                       else measure_train(s, b, devs, sharded=True))
            except Exception as e:
                row = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
            _emit({"workload": name, "devices": d, "batch": b, **row})


def _run_worker(spec: dict, timeout_s: float, host_devices: int | None = None) -> Iterator[dict]:
    """One worker subprocess; its rows as they come, then an error row if it failed."""
    env = dict(os.environ)
    if host_devices is not None:
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_"
                            f"count={host_devices}").strip()
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(spec)]
    timed_out = threading.Event()
    with tempfile.TemporaryFile("w+") as err, subprocess.Popen(
            cmd, env=env, stdout=subprocess.PIPE, stderr=err, text=True) as proc:

        def kill() -> None:
            timed_out.set()
            proc.kill()

        timer = threading.Timer(timeout_s, kill)
        timer.start()
        try:
            for line in proc.stdout or ():
                if line.startswith(ROW):
                    yield json.loads(line[len(ROW):])
            proc.wait()
        finally:
            timer.cancel()
            if proc.poll() is None:  # the caller stopped early
                proc.kill()
        if proc.returncode:
            err.seek(0)
            tail = err.read().strip().splitlines()
            yield {"error": f"timed out after {timeout_s:.0f}s" if timed_out.is_set()
                   else (tail[-1][:300] if tail else f"exit status {proc.returncode}")}


# ----------------------------------------------------------------------------------- driver
def _powers(lo: int, hi: int) -> list[int]:
    return [1 << k for k in range(int(math.log2(lo)), int(math.log2(hi)) + 1)]


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true",
                   help="CI-sized (about 2 CPU-minutes): env at batches 64 and 256, train "
                        "(one update) and verify at 64, 1 repeat, env over 1 and 2 devices")
    p.add_argument("--min-batch", type=harness.positive_int, default=64)
    p.add_argument("--max-batch", type=harness.positive_int, default=1 << 20)
    p.add_argument("--device-batch", type=harness.positive_int, default=None,
                   help="total envs of the device-count sweep (default: min(max batch, 2^16))")
    p.add_argument("--devices", type=harness.int_list, default=None,
                   help="device counts, e.g. 1,2,4 (default: powers of 2 up to the devices "
                        "present; on CPU, up to the cores)")
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--repeats", type=harness.positive_int, default=3)
    p.add_argument("--max-run-s", type=float, default=30.0,
                   help="stop growing a workload's batch after a run this long")
    p.add_argument("--worker-timeout", type=float, default=3600.0)
    for f in ("size", "agents", "density", "view_radius", "max_steps", "env_budget", "rollout",
              "updates", "epochs", "minibatches", "pool_size", "hidden", "verify_k"):
        default = getattr(Settings, f)
        p.add_argument("--" + f.replace("_", "-"), default=default,
                       type=harness.positive_int if isinstance(default, int) else float)
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--png", type=Path, default=None)
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    unknown = sorted(set(a.workloads.split(",")) - set(WORKLOADS))
    if unknown:
        p.error(f"--workloads: {unknown} are none of {', '.join(WORKLOADS)}")
    return a


def run(a: argparse.Namespace, argv: Sequence[str]) -> dict:
    s = Settings(**{f: getattr(a, f) for f in Settings.__dataclass_fields__
                    if f not in ("repeats", "max_run_s")},
                 repeats=a.repeats, max_run_s=a.max_run_s)
    max_batch = a.max_batch
    batches = _powers(max(a.min_batch, s.verify_k), max_batch)
    workloads = [w for w in WORKLOADS if w in a.workloads.split(",")]
    sweep = {w: batches for w in workloads}
    if a.quick:  # smallest sizes that still show each part: see --help
        s = replace(s, repeats=1, updates=1)
        max_batch = min(max_batch, 256)
        lo = max(a.min_batch, s.verify_k)
        sweep = {w: [lo, max_batch] if w == "env" else [lo] for w in workloads}
    t0 = time.perf_counter()
    result: dict = {"meta": {"host": platform.platform(), "cpus": os.cpu_count(),
                             "load_avg_start": _load(),
                             "python": platform.python_version(),
                             "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                             "command": harness.command(__file__, argv),
                             "settings": asdict(s)},
                    "batch": {}, "devices": {}}
    meta: dict = {}
    for w in workloads:
        result["batch"][w] = []
        for r in _run_worker({"kind": "batch", "workload": w, "settings": asdict(s),
                              "batches": sweep[w]}, a.worker_timeout):
            if "meta" in r:
                meta = meta or r["meta"]
                continue
            result["batch"][w].append(r)
            print(_line(w, r), flush=True)
    result["meta"].update(meta)

    cpu = meta.get("backend", "cpu") == "cpu"
    top = (os.cpu_count() or 1) if cpu else meta.get("device_count", 1)
    counts = a.devices or _powers(1, 2 if a.quick else max(1, top))
    dev_batch = a.device_batch or min(max_batch, 1 << 16)
    dev_batch = max(dev_batch, max(counts))
    dev_workloads = [w for w in workloads if w != "verify" and not (a.quick and w == "train")]
    result["devices"] = {"batch": dev_batch, "host_devices": cpu, "env": [], "train": [],
                         "verify": "not measured: designer.run.scoring.CandidateScorer runs "
                                   "on one device"}
    for d in counts if dev_workloads else []:
        for r in _run_worker({"kind": "devices", "devices": d, "batch": dev_batch,
                              "workloads": dev_workloads, "settings": asdict(s)},
                             a.worker_timeout, host_devices=d if cpu else None):
            if "meta" in r:
                continue
            w = r.pop("workload", None)
            for name in ([w] if w else dev_workloads):
                result["devices"][name].append({"devices": d, **r})
                print(_line(f"{name} x{d}", r), flush=True)
    result["sizing"] = sizing(result)
    result["meta"]["wall_s"] = time.perf_counter() - t0
    result["meta"]["load_avg_end"] = _load()
    harness.write_json(a.json, result, command=harness.command(__file__, argv), seeds=[0, 1])
    if a.png:
        plot(result, a.png)
    print(summary(result))
    return result


def sizing(result: dict) -> dict:
    """Per workload: device bytes per extra env and fixed bytes, from the two largest batches.

    The device's peak in use where the backend reports it, else XLA's compiled estimate;
    with the device's memory limit, also the largest batch that fits in 90% of it.
    """
    out = {}
    for w, rows in result["batch"].items():
        for src in ("peak_bytes", "compiled_bytes"):
            pts = [(r["batch"], r[src]) for r in rows if isinstance(r.get(src), int)]
            if len(pts) < 2:
                continue
            (b1, m1), (b2, m2) = pts[-2:]
            per_env = max((m2 - m1) / (b2 - b1), 1e-9)
            entry = {"source": src, "bytes_per_env": per_env, "fixed_bytes": m2 - per_env * b2,
                     "from_batches": [b1, b2]}
            limit = next((r["limit_bytes"] for r in rows if r.get("limit_bytes")), None)
            if limit:
                entry["limit_bytes"] = limit
                entry["max_envs_in_90pct"] = int((0.9 * limit - entry["fixed_bytes"]) / per_env)
            out[w] = entry
            break
    return out


def _load() -> list[float] | None:
    """The host's 1/5/15-minute load: on a shared machine, read the figures with it."""
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


def _line(name: str, r: dict) -> str:
    if "error" in r:
        return f"{name:9s} B={r.get('batch', '-')}: {r['error']}"
    mem = r.get("peak_bytes_per_env") or r.get("compiled_bytes_per_env")
    return (f"{name:9s} B={r['batch']:>8d}  {r['env_steps_per_s']:10.3g} env-steps/s  "
            f"{r['agent_steps_per_s']:10.3g} agent-steps/s  run {r['run_s']:.3g}s  "
            f"compile {r['compile_s']:.1f}s" + (f"  {mem:,.0f} B/env" if mem else ""))


def summary(result: dict) -> str:
    m = result["meta"]
    lines = [f"{m.get('device_kind')} ({m.get('backend')}), jax {m.get('jax')}, "
             f"{m.get('cpus')} CPUs; {m['settings']['size']}x{m['settings']['size']}, "
             f"{m['settings']['agents']} agents"]
    for w, rows in result["batch"].items():
        ok = [r for r in rows if "error" not in r]
        if ok:
            best = max(ok, key=lambda r: r["agent_steps_per_s"])
            lines.append(f"- {w}: best {best['agent_steps_per_s']:.3g} agent-steps/s "
                         f"({best['env_steps_per_s']:.3g} env-steps/s) at B={best['batch']}, "
                         f"largest B {ok[-1]['batch']}")
    for w, z in result.get("sizing", {}).items():
        lines.append(f"- {w} memory: {z['bytes_per_env']:,.0f} B per env + "
                     f"{z['fixed_bytes'] / 2**20:,.1f} MiB ({z['source']})"
                     + (f", fits {z['max_envs_in_90pct']:,} envs in 90% of "
                        f"{z['limit_bytes'] / 2**30:.0f} GiB" if "limit_bytes" in z else ""))
    for w in ("env", "train"):
        ok = [r for r in result["devices"].get(w, []) if "error" not in r]
        if ok:
            lines.append(f"- {w} at B={result['devices']['batch']}: " + ", ".join(
                f"{r['devices']} dev {r['env_steps_per_s']:.3g}" for r in ok) + " env-steps/s")
    return "\n".join(lines)


def plot(result: dict, path: Path) -> None:
    """A 2x2 log-log figure: throughput, device scaling, memory per env, compile time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    m = result["meta"]
    agents = m["settings"]["agents"]
    colors = {"env": "tab:blue", "train": "tab:orange", "verify": "tab:green"}
    fig, ax = plt.subplots(2, 2, figsize=(12, 9))
    (thr, dev), (mem, comp) = ax
    for w, rows in result["batch"].items():
        ok = [r for r in rows if "error" not in r]
        if not ok:
            continue
        bs = [r["batch"] for r in ok]
        thr.plot(bs, [r["env_steps_per_s"] for r in ok], "o-", color=colors[w], label=w)
        comp.plot(bs, [r["compile_s"] for r in ok], "o-", color=colors[w], label=w)
        peak = [(r["batch"], r["peak_bytes_per_env"]) for r in ok if "peak_bytes_per_env" in r]
        est = [(r["batch"], r["compiled_bytes_per_env"]) for r in ok
               if r.get("compiled_bytes_per_env")]
        if peak:
            mem.plot(*zip(*peak), "o-", color=colors[w], label=f"{w}: peak in use")
        if est:
            mem.plot(*zip(*est), "s--", color=colors[w], label=f"{w}: compiled estimate")
    sec = thr.secondary_yaxis("right", functions=(lambda x: x * agents, lambda x: x / agents))
    sec.set_ylabel(f"agent-steps/s ({agents} agents)")
    thr.set(xscale="log", yscale="log", xlabel="batch (envs; verify: episodes)",
            ylabel="env-steps/s", title="throughput vs batch (1 device)")
    for w in ("env", "train"):
        ok = [r for r in result["devices"].get(w, []) if "error" not in r]
        if ok:
            ds = [r["devices"] for r in ok]
            dev.plot(ds, [r["env_steps_per_s"] for r in ok], "o-", color=colors[w], label=w)
            dev.plot(ds, [ok[0]["env_steps_per_s"] * d / ds[0] for d in ds], ":",
                     color=colors[w], label=f"{w}: linear")
    kind = "host CPU devices" if result["devices"].get("host_devices") else "devices"
    dev.set(xscale="log", yscale="log", xlabel=kind, ylabel="env-steps/s",
            title=f"strong scaling, {result['devices'].get('batch')} envs in all")
    mem.set(xscale="log", yscale="log", xlabel="batch", ylabel="bytes per env",
            title="device memory per env" + ("" if any(
                "peak_bytes_per_env" in r for rows in result["batch"].values() for r in rows)
                else f" (memory_stats {UNAVAILABLE} on {m.get('backend')})"))
    comp.set(xscale="log", yscale="log", xlabel="batch", ylabel="seconds",
             title="compile time (trace + lower + compile)")
    for a_ in (thr, mem, comp, dev):
        ticks = sorted({r.get("devices" if a_ is dev else "batch") for rows in (
            result["devices"].values() if a_ is dev else result["batch"].values())
            if isinstance(rows, list) for r in rows if "error" not in r} - {None})
        if ticks:
            a_.set_xticks(ticks, [str(t) if a_ is dev else f"$2^{{{int(math.log2(t))}}}$"
                                  for t in ticks])
            a_.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    for a_ in (thr, dev, mem, comp):
        a_.grid(True, which="both", alpha=0.3)
        if a_.get_legend_handles_labels()[0]:
            a_.legend(fontsize=8)
    fig.suptitle(f"{m.get('device_kind')} ({m.get('backend')}), jax {m.get('jax')}: MAPF "
                 f"{m['settings']['size']}x{m['settings']['size']}, {agents} agents")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> dict | None:
    argv = list(sys.argv[1:] if argv is None else argv)
    a = parse(argv)
    if a.worker:
        worker(json.loads(a.worker))
        return None
    return run(a, argv)


if __name__ == "__main__":
    main()
