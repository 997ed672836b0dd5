"""The engineer's adapters shipped in the package, and which one a run uses.

A shipped adapter is a folder here, ``<name>/adapter.safetensors`` (a LoRA of the engineer's
model, `policy.llm.engineer_rl.EngineerLearner.save_adapter`) with its ``MODEL_CARD.md``
(base model, data, steps, metrics, the command that rebuilds it: ``scripts/train_engineer.py``).

The run option ``adapter`` (``--adapter shipped|none|NAME|PATH``) names one: ``none`` is the
base model, ``shipped`` the default shipped adapter (`SHIPPED`), a name one of the folders
here, a path any adapter file. `resolve` gives its file; the transformers backend merges it
into the base once (`policy.llm.engineer_rl.merged_model`, cached by the adapter's hash).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
FILE = "adapter.safetensors"
SHIPPED = "smollm2-moves"  # the adapter `shipped` names
NONE = "none"


def shipped() -> list[str]:
    """The names of the adapters shipped in the package."""
    return sorted(p.parent.name for p in HERE.glob(f"*/{FILE}"))


def resolve(spec: str | None) -> Path | None:
    """The adapter file ``spec`` names (module docstring); None for ``none``; a ValueError
    saying what exists for anything else."""
    if spec is None or spec == NONE:
        return None
    name = SHIPPED if spec == "shipped" else spec
    path = Path(spec).expanduser()
    try:  # a name the filesystem refuses (too long, say) names no adapter either
        if (HERE / name / FILE).is_file():
            return HERE / name / FILE
        if path.is_dir() and (path / FILE).is_file():
            return path / FILE
        if path.is_file() and path.suffix == ".safetensors":
            return path
    except OSError:
        pass
    shown = spec if len(spec) <= 200 else f"{spec[:200]}... ({len(spec)} characters)"
    raise ValueError(f"no adapter {shown!r}: give none, shipped, a shipped name "
                     f"({', '.join(shipped()) or 'none shipped'}) or a .safetensors file")


def describe(spec: str | None) -> str:
    """Where a run's adapter comes from, for its log: the file and its content hash."""
    path = resolve(spec)
    if path is None:
        return "none (the base model)"
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    where = f"shipped {path.parent.name}" if path.parent.parent == HERE else "file"
    return f"{where}: {path} (sha256 {digest})"


def announce(spec: str) -> str:
    """The adapter's file for a backend to merge, its origin printed on the console first (a
    run's user sees which weights answer)."""
    import sys

    print(f"engineer adapter: {describe(spec)}", file=sys.stderr, flush=True)
    return str(resolve(spec))
