"""What a run records about how it ran: the training budget as run (and why it differs from
the one asked for), the package versions and the git commit; and the one config broadcast a
multi-process run needs so that every process trains process 0's choice."""

from __future__ import annotations

import json
import platform
import subprocess
from contextlib import suppress
from pathlib import Path
from typing import Any

import numpy as np

from designer.settings import RunSettings


def budget(settings: RunSettings, trainee: Any) -> dict[str, Any]:
    """The training budget per stage: the env steps asked for (`stage_steps`), those a stage
    trains (`trainee.steps_per_stage`) and, where they differ, why."""
    ran, asked = int(trainee.steps_per_stage), int(settings.stage_steps)
    why, kind = None, getattr(trainee, "kind", None)
    if ran != asked:
        why = "the trainee's own budget per stage"
        if kind == "ppo":
            t = settings.trainee
            why = (f"rounded to whole PPO updates: {settings.num_updates} x ({t.num_envs} envs "
                   f"x {t.num_steps} steps)")
        elif kind == "llm":
            m = settings.llm
            why = (f"the LLM trainee samples {m.steps} GRPO updates x {m.prompts_per_step} "
                   f"prompts x {m.group} replies a stage (its `llm` settings; --stage-steps "
                   "is the PPO trainee's)")
    return {"stage_steps_asked": asked, "stage_steps": ran, "why": why}


def budget_line(b: dict[str, Any]) -> str | None:
    """One line saying that a stage trains other than the asked steps, and why; else None."""
    if b.get("why") is None:
        return None
    return (f"each stage trains {b['stage_steps']:,} env steps, not the {b['stage_steps_asked']:,} "
            f"asked for: {b['why']}")


def versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for pkg in ("jax", "jaxlib", "flax", "optax", "gymnax", "numpy", "envengineer",
                "transformers", "outlines", "torch"):
        with suppress(md.PackageNotFoundError):
            out[pkg] = md.version(pkg)
    return out


def git_commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).parent, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def broadcast_values(values: dict[str, Any], size: int = 1 << 16) -> dict[str, Any]:
    """Process 0's config values on every process (JSON bytes in a fixed-size buffer)."""
    from jax.experimental import multihost_utils

    blob = json.dumps(values).encode()
    if len(blob) > size:
        raise ValueError(f"a config of {len(blob)} bytes does not fit the broadcast buffer")
    buf = np.zeros(size + 4, np.uint8)
    buf[:4] = np.frombuffer(np.uint32(len(blob)).tobytes(), np.uint8)
    buf[4:4 + len(blob)] = np.frombuffer(blob, np.uint8)
    got = np.asarray(multihost_utils.broadcast_one_to_all(buf))
    n = int(np.frombuffer(got[:4].tobytes(), np.uint32)[0])
    return json.loads(got[4:4 + n].tobytes().decode())
