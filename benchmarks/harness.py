"""What every benchmark shares, written once: the timer, the env-only random-action rollout,
the pool broadcast and the JSON writer.

- Timing: `time_rounds` warms each call up (compile included) and then times it `repeats`
  times, the calls in turn within each round so that load on the machine hits them alike;
  results are awaited (`jax.block_until_ready`) inside the timer. `CompileClock` adds the
  seconds JAX spends tracing, lowering and compiling.
- Rollout: `random_rollout` scans a batch of envs under uniformly random actions (the
  env-only side every throughput figure is set against); `batch_pool` gives B envs the
  params of one level pool, `pool_step` / `pool_reset` their vmapped `PoolReset` calls;
  `full_size_values` is a MAPF config whose every level has the capacity's size and agents.
- JSON: `write_json` saves a result with its provenance (the command that reruns it, the
  commit, the machine and the seeds).
- Flags: `positive_int` and `int_list`, argparse types that refuse a count a benchmark would
  only trip over after minutes of measuring.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxenv.batching import broadcast
from jaxenv.levels import PoolParams

REPO = Path(__file__).resolve().parent.parent
COMPILE_EVENTS = ("/jax/core/compile/jaxpr_trace_duration",
                  "/jax/core/compile/jaxpr_to_mlir_module_duration",
                  "/jax/core/compile/backend_compile_duration")

# A vmapped env step: (per-env keys, state, joint actions) -> (obs, state, reward).
Step = Callable[[jax.Array, Any, Any], tuple[Any, Any, jax.Array]]


# ----------------------------------------------------------------------------------- timing
class Timing(NamedTuple):
    """One call's wall-clock and process-CPU seconds."""

    wall_s: float
    cpu_s: float


@dataclass(frozen=True)
class Rounds:
    """The timings of one call: its warm-up (None without one) and its timed runs."""

    first: Timing | None
    runs: list[Timing]

    @property
    def wall_s(self) -> list[float]:
        return [t.wall_s for t in self.runs]

    @property
    def median_s(self) -> float:
        return statistics.median(self.wall_s)

    @property
    def best_s(self) -> float:
        return min(self.wall_s)


def time_call(fn: Callable[..., Any], *args: Any) -> tuple[Any, Timing]:
    """`fn(*args)` with its result ready, and the seconds it took."""
    t, c = time.perf_counter(), time.process_time()
    out = jax.block_until_ready(fn(*args))
    return out, Timing(time.perf_counter() - t, time.process_time() - c)


def time_rounds(calls: Mapping[str, Callable[[int], Any]], repeats: int, *,
                warmup: bool = True,
                on_result: Callable[[str, Any], None] | None = None) -> dict[str, Rounds]:
    """Time each call `repeats` times after a warm-up, the calls in turn within each round.

    A call gets its round: 0 for the warm-up, then 1 ... `repeats` (derive keys from it;
    anything it computes is timed, so build inputs beforehand). `on_result(name, out)` sees
    every timed result, outside the timer.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    first = {name: time_call(fn, 0)[1] if warmup else None for name, fn in calls.items()}
    runs: dict[str, list[Timing]] = {name: [] for name in calls}
    for r in range(1, repeats + 1):
        for name, fn in calls.items():
            out, t = time_call(fn, r)
            runs[name].append(t)
            if on_result is not None:
                on_result(name, out)
    return {name: Rounds(first[name], runs[name]) for name in calls}


class CompileClock:
    """Seconds JAX spends tracing, lowering and compiling while the context is open."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def _listen(self, event: str, duration: float, **_: Any) -> None:
        if event in COMPILE_EVENTS:
            self.seconds += duration

    def __enter__(self) -> CompileClock:
        jax.monitoring.register_event_duration_secs_listener(self._listen)
        return self

    def __exit__(self, *exc: Any) -> None:
        jax.monitoring.unregister_event_duration_listener(self._listen)


# ---------------------------------------------------------------------------------- rollout
def batch_pool(params: PoolParams, batch: int) -> PoolParams:
    """The params of `batch` envs that share the level pool of `params` (`make_pool`'s): each
    env has the pool's config and draws from the whole pool (the pool itself is held once)."""
    return params.replace(cfg=broadcast(params.cfg, batch), lo=broadcast(params.lo, batch),
                          count=broadcast(params.count, batch))


def pool_reset(env: Any, params: PoolParams, keys: jax.Array) -> tuple[Any, Any]:
    """`env.reset` (a `PoolReset` env) vmapped over envs with `batch_pool` params."""
    return jax.vmap(env.reset, (0, PoolParams.in_axes()))(keys, params)


def pool_step(env: Any, params: PoolParams) -> Step:
    """`env.step` (a `PoolReset` env) vmapped over envs with `batch_pool` params."""
    step = jax.vmap(env.step, (0, 0, 0, PoolParams.in_axes()))

    def run(keys: jax.Array, state: Any, action: Any) -> tuple[Any, Any, jax.Array]:
        obs, state, reward, *_ = step(keys, state, action, params)
        return obs, state, reward
    return run


def full_size_values(space: Any, agents: int, density: float) -> dict[str, Any]:
    """MAPF config values (of `space`, a `MAPFFrozenLake.config_space`) whose every level has
    the largest size and `agents` agents, at hole ratio `density`; the rest the defaults."""
    v = space.default()
    n_sizes = len(v["size_weights"])
    return {**v, "size_weights": [0.0] * (n_sizes - 1) + [1.0],
            "hole_ratio": [density] * n_sizes, "agent_weights": [0.0] * (agents - 1) + [1.0]}


def uniform_actions(batch: int, agents: int, num_actions: int) -> Callable[[jax.Array], Any]:
    """Uniformly random discrete joint actions [batch, agents]."""
    return lambda key: jax.random.randint(key, (batch, agents), 0, num_actions)


def random_rollout(step: Step, obs: Any, state: Any, key: jax.Array, steps: int, *,
                   actions: Callable[[jax.Array], Any],
                   env_keys: Callable[[jax.Array], jax.Array],
                   read: Callable[[Any, Any], Any] | None = None) -> tuple[Any, Any, jax.Array]:
    """`steps` env steps of a batch under random actions, in one `lax.scan` (call it in jit).

    Each step splits its key into an action key (`actions(key)`: the batch's joint action)
    and a step key (`env_keys(key)`: one key per env). `read(obs, state)` is what a policy
    would read; it is carried, so every step computes and writes it, and the last step's is
    returned (from the reset's `obs` when `steps` is 0). Returns (state, last read, the sum
    of all rewards).
    """
    def look(obs: Any, state: Any) -> Any:
        return None if read is None else read(obs, state)

    def body(carry: tuple, k: jax.Array) -> tuple[tuple, None]:
        state, _, total = carry
        ka, ks = jax.random.split(k)
        obs, state, reward = step(env_keys(ks), state, actions(ka))
        return (state, look(obs, state), total + jnp.sum(reward)), None

    carry0 = (state, look(obs, state), jnp.float32(0))
    return jax.lax.scan(body, carry0, jax.random.split(key, steps))[0]


# ------------------------------------------------------------------------------------- JSON
def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1 (sizes, counts, repeats)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"an integer >= 1, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"an integer >= 1, got {n}")
    return n


def int_list(text: str) -> list[int]:
    """An argparse type: comma-separated integers >= 1, e.g. device counts ``1,2,4``."""
    out = [positive_int(x.strip()) for x in text.split(",") if x.strip()]
    if not out:
        raise argparse.ArgumentTypeError(f"comma-separated integers >= 1, got {text!r}")
    return out


def command(script: str, argv: Sequence[str] | None) -> str:
    """The command that reruns a benchmark: `python benchmarks/NAME.py ARGS` (`argv` None:
    this process's own arguments)."""
    args = list(sys.argv[1:] if argv is None else argv)
    path = Path(script).resolve()
    shown = path.relative_to(REPO) if path.is_relative_to(REPO) else path
    return shlex.join(["python", str(shown), *map(str, args)])


def commit() -> dict[str, Any]:
    """The repository's commit and whether tracked files differ from it (None outside git)."""
    def git(*args: str) -> str | None:
        try:
            return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True,
                                  text=True, check=True, timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None

    sha = git("rev-parse", "HEAD")
    changes = git("status", "--porcelain", "--untracked-files=no") if sha else None
    return {"commit": sha, "dirty": None if changes is None else bool(changes)}


def machine() -> dict[str, Any]:
    """The host, and the JAX devices a figure was measured on where this process started a
    backend (a driver whose workers measure, such as scaling.py, starts none: it stays so)."""
    from jax._src import xla_bridge

    out: dict[str, Any] = {"platform": platform.platform(),
                           "processor": platform.processor() or None, "cpus": os.cpu_count(),
                           "python": platform.python_version(), "jax": jax.__version__}
    if xla_bridge.backends_are_initialized():
        devices = jax.devices()
        out.update(backend=jax.default_backend(), device_kind=devices[0].device_kind,
                   device_count=len(devices))
    return out


def provenance(command: str, seeds: Sequence[int | str]) -> dict[str, Any]:
    """What makes a figure reproducible: the command, the commit, the machine, the seeds."""
    return {"command": command, **commit(), "machine": machine(), "seeds": list(seeds),
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def write_json(path: Path | None, result: Mapping[str, Any], *, command: str,
               seeds: Sequence[int | str]) -> None:
    """Write `result` as indented JSON to `path` (folders made as needed) with its
    `provenance` under that key; nothing if `path` is None. `seeds`: the random seeds the
    run drew from (empty where it draws nothing)."""
    if path is None:
        return
    if "provenance" in result:
        raise ValueError("a result may not carry its own 'provenance' key")
    path.parent.mkdir(parents=True, exist_ok=True)
    out = {**result, "provenance": provenance(command, seeds)}
    path.write_text(json.dumps(out, indent=1) + "\n")
