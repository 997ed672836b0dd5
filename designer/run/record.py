"""A stage's record in the run folder: what a finished stage writes, and the same stage read back.

`record_stage` writes a stage in the order that makes it resumable: its JSON files, then its
checkpoint, then `done.json` (the stage counts as finished from that file on, see
`designer.run.folder`), the line it adds to `metrics.jsonl` and its TensorBoard scalars.
`load_stage` reads a finished stage back for `resume`, every file checked against its digest,
its schema and the config space.

The TensorBoard events are written with tensorboard's own event writer (no TensorFlow needed);
without the `tensorboard` package `EventLog` does nothing, so a run never depends on it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from designer.run.folder import RunCorrupt, RunFolder


@dataclass
class StageResult:
    """One finished stage as the loop hands it on and as its files hold it."""

    stage: int
    values: dict[str, Any]
    env_steps: int
    times: dict[str, float]
    validation: dict[str, Any]  # table (validation split)
    heldout: dict[str, Any] | None  # table (held-out split), None where not evaluated
    train: dict[str, float]
    choice: dict[str, Any] = field(default_factory=dict)
    last: bool = False


def record_stage(folder: RunFolder, r: StageResult, files: Mapping[str, Any], *,
                 save: Callable[[Path], None], stage_steps: int,
                 headline: Callable[[dict[str, Any]], dict[str, float]]) -> None:
    """Write finished stage `r`: `files` (name -> JSON) into its folder, its checkpoint
    (`save(ckpt_dir)`), then `done.json` with its summary, and its TensorBoard scalars
    (`headline`: the task's headline numbers of a table)."""
    rel = folder.stage_rel(r.stage)
    for name, obj in files.items():
        folder.write_json(rel / name, obj)
    save(folder.stage_dir(r.stage) / "ckpt")
    folder.finish_stage(r.stage, summary(r, stage_steps))
    write_events(folder.path, r, headline)


def summary(r: StageResult, stage_steps: int) -> dict[str, Any]:
    """The stage's line of `metrics.jsonl` (kept in its `done.json`)."""
    held = r.heldout or {}
    return {"stage": r.stage, "env_steps": r.env_steps, "times": r.times, "last": r.last,
            "train_success": r.train["success_rate"],
            "validation_overall": r.validation["overall"],
            "validation_by_agents": r.validation.get("mean_over_sizes"),
            "heldout_overall": held.get("overall"),
            "heldout_by_agents": held.get("mean_over_sizes"), "values": r.values,
            "choice": {k: v for k, v in r.choice.items() if k != "next_values"},
            "fallback": r.choice.get("fallback"),
            "stage_steps": stage_steps}


def write_events(path: Path, r: StageResult,
                 headline: Callable[[dict[str, Any]], dict[str, float]]) -> None:
    """TensorBoard scalars of a finished stage (x axis: training env steps)."""
    log = EventLog(path)
    vals = {f"train/{k}": v for k, v in r.train.items() if isinstance(v, float | int)}
    vals.update({f"time/{k}": v for k, v in r.times.items()})
    vals.update({f"validation/{k}": v for k, v in headline(r.validation).items()})
    if r.heldout is not None:
        vals.update({f"heldout/{k}": v for k, v in headline(r.heldout).items()})
        for k, c in r.heldout.get("mean_over_sizes", {}).items():
            vals[f"heldout/valid_{k}_agents"] = c["valid"]
            vals[f"heldout/optimal_{k}_agents"] = c["optimal"]
    log.scalars(r.env_steps, vals)
    log.close()


class EventLog:
    """Scalars per stage into `<folder>/tb` (a no-op without `tensorboard`)."""

    def __init__(self, folder: str | Path):
        try:
            from tensorboard.summary.writer.event_file_writer import EventFileWriter
        except ImportError:
            self._writer = None
            return
        self._writer = EventFileWriter(str(Path(folder) / "tb"))

    @property
    def enabled(self) -> bool:
        return self._writer is not None

    def scalars(self, step: int, values: Mapping[str, float]) -> None:
        if self._writer is None:
            return
        from tensorboard.compat.proto import event_pb2, summary_pb2

        vals = [summary_pb2.Summary.Value(tag=k, simple_value=float(v))
                for k, v in values.items() if v is not None and v == v]
        self._writer.add_event(event_pb2.Event(wall_time=time.time(), step=step,
                                               summary=summary_pb2.Summary(value=vals)))
        self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


def load_stage(folder: RunFolder, k: int, space: Any) -> StageResult:
    """Finished stage `k` from its files, verified (`RunFolder.verify_stage`) and checked
    against their schemas and the config space; RunCorrupt naming the file otherwise."""
    rel = folder.stage_rel(k)
    done = folder.verify_stage(k)
    if done["stage"] != k:
        raise RunCorrupt(f"{folder.name(rel / 'done.json')}: stage: {done['stage']}, in the "
                         f"folder of stage {k}")
    choice = folder.read(rel / "choice.json")
    values = _values(folder, space, folder.read(rel / "config.json")["values"],
                     rel / "config.json", "values")
    choice["next_values"] = _values(folder, space, choice["next_values"], rel / "choice.json",
                                    "next_values")
    return StageResult(stage=k, values=values,
                       env_steps=done["env_steps"], times=done["times"],
                       validation=folder.read(rel / "validation.json")["table"],
                       heldout=folder.read(rel / "heldout.json")["table"],
                       train=folder.read(rel / "train.json"),
                       choice=choice, last=done["last"])


def _values(folder: RunFolder, space: Any, values: dict[str, Any], rel: Path,
            key: str) -> dict[str, Any]:
    """A saved config checked against the config space (bounds, grid of kinds, pins)."""
    from jaxenv.config_space import ConfigError

    try:
        return space.validate(values)
    except ConfigError as e:
        raise RunCorrupt(f"{folder.name(rel)}: {key}.{e}") from None
