"""TensorBoard event files for a run's metrics, when the `tensorboard` package is installed.

Written with tensorboard's own event writer (no TensorFlow needed); without the package,
`EventLog` does nothing and says so once, so a run never depends on it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path


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
