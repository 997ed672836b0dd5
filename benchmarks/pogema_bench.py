"""POGEMA side of the env-throughput benchmark, run in its own virtualenv.

POGEMA pins an old numpy and pydantic, so imported from our venv (stdlib only at import time)
`ensure_pogema_venv` builds ``.venv-pogema`` once and `run_pogema` runs this same file there
as a script, parsing the one JSON line it prints; as ``__main__`` it is the measurement. The
POGEMA options chosen and why: docs/benchmarks.md, "The POGEMA side (`benchmarks/pogema_bench.py`)".
"""

from __future__ import annotations

import argparse
import fcntl
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["POGEMA_PINS", "POGEMA_VENV", "ensure_pogema_venv", "pogema_python", "run_pogema"]

REPO_ROOT = Path(__file__).resolve().parent.parent
POGEMA_VENV = REPO_ROOT / ".venv-pogema"

# pogema 1.4.0 declares gymnasium==0.28.1, numpy>1.23.5,<=1.26.4, pydantic>=1.8.2,<=1.9.1;
# we pin the top of each range (installs cleanly on CPython 3.11, wheels for all of them).
POGEMA_PINS: tuple[str, ...] = (
    "pogema==1.4.0",
    "gymnasium==0.28.1",
    "numpy==1.26.4",
    "pydantic==1.9.1",
)
_MARKER = ".pogema-bench-installed"
_TAIL = 3000


def pogema_python(venv: Path = POGEMA_VENV) -> Path:
    """Interpreter of the POGEMA venv (POSIX layout; the benchmark only runs on Linux)."""
    return venv / "bin" / "python"


def _tail(text: str, n: int = _TAIL) -> str:
    return text[-n:] if len(text) > n else text


def _run_checked(cmd: list[str], what: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        out = _tail(proc.stdout + proc.stderr)
        raise RuntimeError(f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}\n{out}")


def ensure_pogema_venv(python: str = "python3", venv: Path = POGEMA_VENV) -> Path:
    """Create ``venv`` with POGEMA installed, once; return its interpreter.

    A marker file holding the pins records a finished install, so later calls only read it.
    A file lock inside the venv folder keeps concurrent callers from installing twice.
    """
    venv = Path(venv)
    exe = pogema_python(venv)
    marker = venv / _MARKER
    wanted = json.dumps({"pins": list(POGEMA_PINS)})
    if exe.exists() and marker.exists() and marker.read_text() == wanted:
        return exe

    venv.mkdir(parents=True, exist_ok=True)
    with open(venv / ".pogema-bench.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if exe.exists() and marker.exists() and marker.read_text() == wanted:
            return exe  # another process finished the install while we waited
        marker.unlink(missing_ok=True)
        if not exe.exists():
            _run_checked([python, "-m", "venv", str(venv)], "creating the POGEMA venv")
        _run_checked(
            [str(exe), "-m", "pip", "install", "--disable-pip-version-check", *POGEMA_PINS],
            "pip install of POGEMA",
        )
        _run_checked([str(exe), "-I", "-c", "import pogema"], "importing pogema in its venv")
        marker.write_text(wanted)
    return exe


def run_pogema(
    size: int,
    density: float,
    num_agents: int,
    steps: int,
    repeats: int,
    obs_radius: int = 5,
    seed: int = 0,
    timeout: float = 900.0,
    *,
    max_episode_steps: int = 256,
    on_target: str = "finish",
    collision_system: str = "priority",
    warmup: int = 200,
) -> dict[str, Any]:
    """Measure POGEMA with random actions in its own venv (installed on first use).

    Returns the parsed JSON report: ``agent_steps_per_s_median``, ``env_steps_per_s_median``,
    the per-repeat lists, ``pogema_version`` and the ``config`` used. ``max_episode_steps``
    should be set to our env's step limit for the same case for a like-for-like comparison.
    """
    exe = ensure_pogema_venv()
    cmd = [
        str(exe),
        "-I",  # isolated: our venv's PYTHONPATH/user site must not leak numpy 2 into it
        str(Path(__file__).resolve()),
        "--size", str(size),
        "--density", str(density),
        "--num-agents", str(num_agents),
        "--steps", str(steps),
        "--repeats", str(repeats),
        "--obs-radius", str(obs_radius),
        "--seed", str(seed),
        "--max-episode-steps", str(max_episode_steps),
        "--on-target", on_target,
        "--collision-system", collision_system,
        "--warmup", str(warmup),
    ]  # fmt: skip
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"POGEMA benchmark timed out after {timeout}s: {' '.join(cmd)}") from exc
    if proc.returncode != 0:
        raise RuntimeError(
            f"POGEMA benchmark failed (exit {proc.returncode}): {' '.join(cmd)}\n"
            f"{_tail(proc.stdout + proc.stderr)}"
        )
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError(f"POGEMA benchmark printed no JSON line:\n{_tail(proc.stdout)}")


def _measure(args: argparse.Namespace) -> dict[str, Any]:
    """The timed loop; runs inside the POGEMA venv only."""
    import numpy as np
    import pogema
    from pogema import GridConfig, pogema_v0

    config = {
        "size": args.size,
        "density": args.density,
        "num_agents": args.num_agents,
        "obs_radius": args.obs_radius,
        "max_episode_steps": args.max_episode_steps,
        "seed": args.seed,
        "on_target": args.on_target,
        "collision_system": args.collision_system,
        "observation_type": "default",
    }
    env = pogema_v0(GridConfig(**config))
    n = args.num_agents
    rng = np.random.default_rng(args.seed)
    num_actions = int(env.action_space.n)

    def play(actions: np.ndarray) -> tuple[int, float]:
        """Step once per row of ``actions``, resetting when all agents are done.

        Returns the number of resets and the seconds they took (part of the timed total).
        """
        resets, reset_s = 0, 0.0
        for row in actions:
            _, _, terminated, truncated, _ = env.step(row)
            if all(terminated) or all(truncated):
                t = time.perf_counter()
                env.reset()
                reset_s += time.perf_counter() - t
                resets += 1
        return resets, reset_s

    env.reset()
    play(rng.integers(num_actions, size=(args.warmup, n)))

    seconds: list[float] = []
    resets: list[int] = []
    reset_seconds: list[float] = []
    for _ in range(args.repeats):
        env.reset()
        actions = rng.integers(num_actions, size=(args.steps, n))  # drawn outside the timer
        t0 = time.perf_counter()
        count, reset_s = play(actions)
        seconds.append(time.perf_counter() - t0)
        resets.append(count)
        reset_seconds.append(reset_s)

    env_sps = [args.steps / s for s in seconds]
    agent_sps = [args.steps * n / s for s in seconds]
    return {
        "backend": "pogema",
        "pogema_version": pogema.__version__,
        "numpy_version": np.__version__,
        "python_version": sys.version.split()[0],
        "config": config,
        "steps": args.steps,
        "repeats": args.repeats,
        "warmup": args.warmup,
        "seconds": seconds,
        "resets": resets,
        "reset_seconds": reset_seconds,
        "env_steps_per_s": env_sps,
        "agent_steps_per_s": agent_sps,
        "env_steps_per_s_median": statistics.median(env_sps),
        "agent_steps_per_s_median": statistics.median(agent_sps),
    }


def _parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="POGEMA random-action throughput (one JSON line).")
    p.add_argument("--size", type=int, required=True)
    p.add_argument("--density", type=float, required=True)
    p.add_argument("--num-agents", type=int, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--obs-radius", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-episode-steps", type=int, default=256)
    p.add_argument("--on-target", choices=["finish", "nothing", "restart"], default="finish")
    p.add_argument(
        "--collision-system", choices=["priority", "block_both", "soft"], default="priority"
    )
    p.add_argument("--warmup", type=int, default=200)
    args = p.parse_args(argv)
    if args.steps < 1 or args.repeats < 1 or args.warmup < 0:
        p.error("--steps and --repeats must be >= 1, --warmup >= 0")
    return args


if __name__ == "__main__":
    print(json.dumps(_measure(_parse_args())), flush=True)
