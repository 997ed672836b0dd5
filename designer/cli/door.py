"""The command line's door: what every command checks before it creates anything.

A refused input is a `CliError`: one line on stderr, exit status 2. Numbers are bounded
(`bounded`), folders and files to write are checked for writability without leaving anything
behind (`writable_folder`, `writable_file`), and URLs are parsed (`http_url`).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlparse

DEFAULT_OUT = Path("runs")
NAME_MAX = 255  # bytes in one path component (Linux, macOS)
PATH_MAX = 4096  # bytes in a whole path


class CliError(Exception):
    """A user error: printed as one line, exit status 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not usage + message
        raise CliError(f"{self.prog}: {message}")


def command_line() -> str:
    """The command as the user typed it, without the interpreter's or script's path."""
    return " ".join(["envengineer", *sys.argv[1:]])


def on_off(v: str) -> bool:
    """A yes/no flag value (on/off, true/false, yes/no, 1/0)."""
    v = v.strip().lower()
    if v in ("on", "true", "yes", "1"):
        return True
    if v in ("off", "false", "no", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected on or off, got {v!r}")


def bounded(kind: type, low: float, high: float) -> Callable[[str], int | float]:
    """An argparse type: an int (or a finite float) in [low, high]."""
    def parse(text: str) -> int | float:
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {kind.__name__}, got {text[:40]!r}") \
                from None
        if not math.isfinite(v) or not low <= v <= high:
            raise argparse.ArgumentTypeError(f"expected {low:g} to {high:g}, got {text[:40]}")
        return v
    return parse


def within(flag: str, v: float, low: float, high: float) -> None:
    """--flag's value `v` lies in [low, high] (and is finite)."""
    if not math.isfinite(v) or v < low:
        raise CliError(f"--{flag} must be at least {low:g}, got {v:g}")
    if v > high:
        raise CliError(f"--{flag} must be at most {high:g}, got {v:g}")


def http_url(text: str) -> str:
    """An argparse type: an http(s) URL with a host."""
    u = urlparse(text)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise argparse.ArgumentTypeError(f"not an http(s) URL: {text[:80]!r} "
                                         "(e.g. http://localhost:8000/v1)")
    return text


def _shown(path: Path | str) -> str:
    text = str(path)
    return text if len(text) <= 80 else text[:60] + "..." + text[-16:]


def _nearest_existing(path: Path, what: str) -> Path:
    """The nearest folder of (absolute) `path` that exists, or `path` itself."""
    if len(os.fsencode(str(path))) >= PATH_MAX or any(
            len(os.fsencode(p)) > NAME_MAX for p in path.parts):
        raise CliError(f"{what} {_shown(path)}: name too long for the file system")
    p = path
    try:
        while not p.exists():
            p = p.parent
    except (OSError, ValueError) as e:
        raise CliError(f"{what} {_shown(path)}: {e.strerror or e}") from None
    return p


def writable_folder(path: Path, what: str) -> Path:
    """`path` as a folder this process can create (or already has) and write into; nothing is
    created (a probe folder is made and removed in the nearest folder that exists)."""
    p = _nearest_existing(Path(os.path.abspath(path)), what)
    if not p.is_dir():
        raise CliError(f"{what} {path}: {p} is not a folder")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".envengineer-probe-", dir=p))
    except OSError as e:
        raise CliError(f"{what} {path}: cannot write in {p} ({e.strerror or e})") from None
    return path


def writable_file(path: Path, what: str) -> Path:
    """`path` as a file this process can write (its folder checked as `writable_folder`)."""
    full = Path(os.path.abspath(path))
    if _nearest_existing(full, what) == full and full.is_dir():
        raise CliError(f"{what} {path}: is a folder, not a file")
    writable_folder(full.parent, what)
    return path


def is_file(path: Path) -> bool:
    """Whether `path` is a file; False for a name no file system holds."""
    try:
        return path.is_file()
    except (OSError, ValueError):  # a name too long, a NUL byte
        return False


def existing_file(path: Path, what: str, kind: str = "file") -> Path:
    """A file that exists (`kind` names it in the refusal)."""
    if not is_file(path):
        raise CliError(f"{what} {_shown(path)}: no such {kind}")
    return path


def run_folder(path: Path, what: str) -> Path:
    """A folder holding a run (its run.json)."""
    if not is_file(path / "run.json"):
        raise CliError(f"{what} {path}: not a run folder (no run.json)")
    return path
