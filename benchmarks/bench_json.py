"""The one way benchmarks save their figures: `write_json(path, result)` (no-op without a path)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_json(path: Path | None, result: Any) -> None:
    """Write `result` as indented JSON to `path` (folders made as needed); nothing if None."""
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1) + "\n")
