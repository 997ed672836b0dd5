"""Write the control families' frozen held-out and validation sets under jaxenv/data/.

Usage: python scripts/make_control_sets.py [--out DIR] [--check]
--check regenerates in memory and compares with the shipped files (exit 1 on a difference).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from jaxenv.control.registry import ALL_NAMES
from jaxenv.control.sets import SPLITS, build_arrays, data_path, file_name, npz_bytes, write_npz


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=None, help="folder (default: the package's)")
    ap.add_argument("--check", action="store_true", help="compare with the shipped files")
    args = ap.parse_args(argv)
    if args.check and args.out:
        ap.error("--check compares with the shipped files; it takes no --out")
    if args.out:
        try:
            args.out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            ap.error(f"--out: cannot make the folder {args.out} ({e.strerror})")
    bad = 0
    for name in ALL_NAMES:
        for split in SPLITS:
            arrays = build_arrays(name, split)
            if args.check:
                same = npz_bytes(arrays) == data_path(name, split).read_bytes()
                bad += not same
                print(f"{file_name(name, split)}: {'same' if same else 'DIFFERENT'}")
                continue
            path = (args.out / file_name(name, split)) if args.out else data_path(name, split)
            try:
                write_npz(path, arrays)
            except OSError as e:
                raise SystemExit(f"--out: cannot write {path} ({e.strerror})") from None
            print(f"wrote {path} ({len(arrays['values'])} variants)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
