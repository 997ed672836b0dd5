"""Orbax checkpoints of the runner state: atomic, step-indexed, restorable bit for bit.

`save(directory, runner_state, step)` writes `directory/<step>` through an orbax
`CheckpointManager` (orbax writes into a temporary folder and renames it when complete, so a
crash never leaves a half-written checkpoint that `latest_step` would pick). `restore`
needs a template of the same structure (e.g. `trainer.init(key)`) and returns arrays with the
template's dtypes and the saved values, so a resumed run continues exactly where it stopped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp


def _manager(directory: str | Path, max_to_keep: int | None) -> ocp.CheckpointManager:
    # In a multi-process job only the process that calls this writes or reads (process 0
    # saves the host copy of the replicated state): no barrier with the others.
    me = jax.process_index()
    solo = ocp.options.MultiprocessingOptions(primary_host=me, active_processes={me})
    Path(directory).absolute().mkdir(parents=True, exist_ok=True)
    opts = ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, create=False,
                                        multiprocessing_options=solo)
    return ocp.CheckpointManager(Path(directory).absolute(), options=opts)


def save(directory: str | Path, runner_state: Any, step: int, *,
         max_to_keep: int | None = 3, metadata: dict | None = None) -> Path:
    """Write `runner_state` as checkpoint `step` (blocking until it is on disk)."""
    with _manager(directory, max_to_keep) as mgr:
        mgr.save(step, args=ocp.args.StandardSave(jax.device_get(runner_state)),
                 metrics=None, force=True)
        mgr.wait_until_finished()
    if metadata is not None:
        import json

        (Path(directory) / f"{step}.meta.json").write_text(json.dumps(metadata, indent=1))
    return Path(directory) / str(step)


def latest_step(directory: str | Path) -> int | None:
    """The newest complete checkpoint's step, or None."""
    if not Path(directory).is_dir():
        return None
    with _manager(directory, None) as mgr:
        return mgr.latest_step()


def restore(directory: str | Path, like: Any, step: int | None = None) -> Any:
    """The runner state of checkpoint `step` (default: the latest), shaped like `like`."""
    step = latest_step(directory) if step is None else step
    if step is None:
        raise FileNotFoundError(f"no checkpoint in {directory}")
    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, like)
    with _manager(directory, None) as mgr:
        restored = mgr.restore(step, args=ocp.args.StandardRestore(abstract))
    # Orbax returns arrays committed to a device; a jitted stage keys its cache on that, so
    # hand back uncommitted arrays like a fresh `init`'s (no recompilation on resume).
    return jax.tree.map(lambda x: jnp.asarray(np.asarray(x)), restored)
