"""Build (or --check) the frozen MAPF-FrozenLake splits: held-out (reported) and validation.

The builder is `jaxenv.mapf.benchmark.build` (see its docstring for the structure, seeds,
disjointness and determinism); this script is its command line.

    python scripts/make_benchmark.py                      # write jaxenv/data/heldout_v1.npz
    python scripts/make_benchmark.py --check              # regenerate, compare with the file
    python scripts/make_benchmark.py --split validation   # write jaxenv/data/validation_v1.npz
    python scripts/make_benchmark.py --split validation --check
    python scripts/make_benchmark.py --agents 3 --sizes 3 4 --out /tmp/slice.npz
"""

from jaxenv.mapf.benchmark.build import main

if __name__ == "__main__":
    raise SystemExit(main())
