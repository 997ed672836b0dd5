"""The frozen MAPF-FrozenLake splits: instances with exact optimal costs, shipped as data.

Built by ``scripts/make_benchmark.py`` (numpy RNG + the exact CBS solver, independent of the
training generator) and shipped under ``jaxenv/data/``; never used for training. Two splits of
one structure, each its own seed and file (`SPLITS`):

- ``heldout`` (``heldout_v1.npz``, 3,150 instances, 50 per cell): the numbers we publish.
  Nothing that tunes an engineer, a prompt or a choice rule may read it.
- ``validation`` (``validation_v1.npz``, 630 instances, 10 per cell): what the environment
  engineer's failure breakdown and every tuning decision are computed on. No validation
  instance equals a held-out one, even with the agents relabelled (the builder skips such
  candidates; `instance_key`), so tuning on it cannot leak the published numbers.

Structure (the paper's): 3 agents on sizes 3-10, 4 agents on 4-10, 5 agents on 5-10; three
wait-ratio subsets 0.25 / 0.50 / 0.75, in which that share of instances *needs a wait* (every
SoC-optimal plan has an agent stay somewhere before its final arrival); hole ratios drawn from
0.1-0.5 (capped on small maps so that 2k distinct start/goal cells fit); ``per_cell`` instances
per (agents, size, subset). Each instance stores the exact optimal sum of costs and makespan
and one SoC-optimal plan.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import jax.numpy as jnp
import numpy as np

from jaxenv.mapf.level import Level

SUBSETS = (0.25, 0.50, 0.75)
# The paper's cells: agent count -> the map sizes it is played on.
AGENT_SIZES = {3: tuple(range(3, 11)), 4: tuple(range(4, 11)), 5: tuple(range(5, 11))}
KINDS = ("random", "crossing")  # how the candidate was drawn (see scripts/make_benchmark.py)
# The stored plan is a *witness* (one SoC-optimal plan among possibly many): which one the
# solver returns may change with the solver's version, the instances, costs and labels may not.
PLAN_ARRAYS = ("plan_cells", "plan_len")


@dataclass(frozen=True)
class SplitSpec:
    """One frozen split: how it is built (seed, instances per cell), where it is shipped and
    the checksums that pin it (so a split can never change silently)."""

    name: str
    file_name: str
    seed: int  # numpy seed; block (k, n) draws from default_rng([seed, k, n])
    per_cell: int  # instances per (agents, size, wait-ratio subset)
    n_instances: int
    # sha256 of the file's bytes; of its instance arrays (everything but the plans: grids,
    # starts, goals, sizes, subsets, costs, labels, kinds, block stats); of its plan arrays.
    file_sha256: str
    instances_sha256: str
    plans_sha256: str
    disjoint_from: tuple[str, ...] = ()  # splits none of whose instances it may contain
    purpose: str = ""


HELDOUT, VALIDATION = "heldout", "validation"
SPLITS: dict[str, SplitSpec] = {
    HELDOUT: SplitSpec(
        name=HELDOUT, file_name="heldout_v1.npz", seed=20260617, per_cell=50, n_instances=3150,
        file_sha256="fb20a1aabfe13b483a645406300c00c0faa1d8393df8aa0716f52e5c207b63bb",
        instances_sha256="1590e32a8bd8bef757bf36cda3dcb81259e2efe6b0ddadb3b9563410e4887a52",
        plans_sha256="9430d89f7de104f78e8060b013dfee118033bc2bc8978ecba800c038dbadb8ff",
        purpose="reported results only"),
    VALIDATION: SplitSpec(
        name=VALIDATION, file_name="validation_v1.npz", seed=20260618, per_cell=10,
        n_instances=630,
        file_sha256="f6458a15fec252f08c016c5f0ca06404aac1c24b0fcc39a48dfe12687ebd8336",
        instances_sha256="4154e3ec5a23bb1e362bd39ccbe67b9b99c7ffa82f6f5f70cd345f23525a37ff",
        plans_sha256="189b3fc3ae868ec4d07b781987d42b9d7ee6876fa5715ff31483e61c3de53767",
        disjoint_from=(HELDOUT,), purpose="tuning (the engineer's context, choice rules)"),
}

# The held-out split's constants under their historical names.
FILE_NAME = SPLITS[HELDOUT].file_name
N_INSTANCES = SPLITS[HELDOUT].n_instances
FILE_SHA256 = SPLITS[HELDOUT].file_sha256
INSTANCES_SHA256 = SPLITS[HELDOUT].instances_sha256
PLANS_SHA256 = SPLITS[HELDOUT].plans_sha256


def split_spec(split: str) -> SplitSpec:
    """The spec of a split by name; a clear error naming the known splits otherwise."""
    try:
        return SPLITS[split]
    except (KeyError, TypeError):
        raise ValueError(f"unknown split {split!r} (known: {', '.join(SPLITS)})") from None


def data_path(split: str = HELDOUT) -> Path:
    """Where the split's shipped file is (inside the installed package)."""
    return Path(str(resources.files("jaxenv") / "data" / split_spec(split).file_name))


def file_sha256(path: str | Path | None = None, split: str = HELDOUT) -> str:
    """sha256 of a file's bytes (default: the split's shipped file)."""
    return hashlib.sha256(Path(path or data_path(split)).read_bytes()).hexdigest()


def content_sha256(arrays: dict[str, np.ndarray], part: str = "all") -> str:
    """Hash of the arrays' names, dtypes, shapes and bytes (independent of zip/zlib details).

    part: "all", "instances" (every array but PLAN_ARRAYS) or "plans" (PLAN_ARRAYS only).
    """
    if part not in ("all", "instances", "plans"):
        raise ValueError(f"unknown part {part!r}")
    h = hashlib.sha256()
    for name in sorted(arrays):
        if (part == "instances" and name in PLAN_ARRAYS) or (
                part == "plans" and name not in PLAN_ARRAYS):
            continue
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def load_arrays(path: str | Path | None = None, split: str = HELDOUT) -> dict[str, np.ndarray]:
    """The raw arrays of a file (default: the split's shipped file; unpadded dtypes,
    max_size 10, max_agents 5)."""
    with np.load(path or data_path(split), allow_pickle=False) as f:
        return {name: f[name] for name in f.files}


def instance_key(holes: np.ndarray, starts: np.ndarray, goals: np.ndarray) -> bytes:
    """What makes two instances the same problem: the n x n hole grid and the set of
    (start, goal) pairs, whatever the agents' order (a relabelled copy is no new test)."""
    holes = np.asarray(holes, bool)
    pairs = sorted(zip(map(tuple, np.asarray(starts, np.int64).tolist()),
                       map(tuple, np.asarray(goals, np.int64).tolist()), strict=True))
    n, k = holes.shape[0], len(pairs)
    return (bytes([n, k]) + np.packbits(holes.reshape(-1)).tobytes()
            + np.asarray(pairs, np.int8).tobytes())


def instance_keys(arrays: dict[str, np.ndarray]) -> list[bytes]:
    """`instance_key` of every row of a split's raw arrays, in file order."""
    out = []
    for i in range(len(arrays["size"])):
        n, k = int(arrays["size"][i]), int(arrays["n_agents"][i])
        out.append(instance_key(arrays["holes"][i, :n, :n], arrays["starts"][i, :k],
                                arrays["goals"][i, :k]))
    return out


def _select(values: np.ndarray, wanted, what: str, close: bool = False) -> np.ndarray:
    if wanted is None:
        return np.ones(values.shape, bool)
    wanted = np.atleast_1d(np.asarray(wanted, float if close else np.int64))
    if close:
        return np.any(np.isclose(values[:, None], wanted[None, :]), axis=1)
    return np.isin(values, wanted)


def load_split(split: str, max_size: int = 10, max_agents: int = 5, agents=None, sizes=None,
               subsets=None, path: str | Path | None = None) -> tuple[Level, dict]:
    """A frozen split as a batched ``Level`` (padded to max_size / max_agents) and metadata.

    split: ``"heldout"`` (report only) or ``"validation"`` (tuning); ``path`` replaces the
    shipped file but must hold that split's seed, so ``meta["split"]`` cannot lie.
    Filters: ``agents`` (e.g. ``[3]``), ``sizes`` (e.g. ``range(3, 7)``), ``subsets``
    (wait ratios, e.g. ``[0.25]``). Without explicit filters, instances that do not fit the
    capacity (size > max_size or more agents than max_agents) are left out; asking for them
    explicitly raises ``ValueError``. Order: file order (agents, size, subset, draw).

    meta: ``split`` (the split's name, a str), then numpy arrays with one row per instance:
    ``index`` (row in the file), ``agents``, ``size``, ``subset`` (wait ratio),
    ``subset_index``, ``needs_wait`` (bool), ``hole_ratio``, ``kind`` (index into KINDS),
    ``opt_soc``, ``opt_makespan``, and the stored SoC-optimal plan as
    ``plan_cells [B, max_agents, T, 2] int32`` (rows padded by their last cell) and
    ``plan_len [B, max_agents] int32`` (0 for absent agents): ready for
    ``jaxenv.mapf.plans.verify_batch``.
    """
    spec = split_spec(split)
    raw = load_arrays(path, spec.name)
    if int(raw["seed"]) != spec.seed:
        raise ValueError(f"{path or data_path(spec.name)} was built with seed "
                         f"{int(raw['seed'])}, not the {spec.name} split's {spec.seed}")
    k_all = raw["n_agents"].astype(np.int64)
    n_all = raw["size"].astype(np.int64)
    wr_all = raw["subsets"][raw["subset_index"]].astype(np.float64)
    for name, wanted, limit in (("agents", agents, max_agents), ("sizes", sizes, max_size)):
        if wanted is not None and np.any(np.atleast_1d(np.asarray(wanted)) > limit):
            raise ValueError(f"{name}={list(np.atleast_1d(wanted))} do not fit the capacity "
                             f"(max {limit})")
    keep = (_select(k_all, agents, "agents") & _select(n_all, sizes, "sizes")
            & _select(wr_all, subsets, "subsets", close=True)
            & (k_all <= max_agents) & (n_all <= max_size))
    idx = np.flatnonzero(keep)
    b = len(idx)
    src_s = raw["holes"].shape[-1]
    s = max(max_size, src_s)
    holes = np.zeros((b, s, s), bool)
    holes[:, :src_s, :src_s] = raw["holes"][idx]
    holes = holes[:, :max_size, :max_size]

    def agent_rows(x: np.ndarray) -> np.ndarray:
        out = np.zeros((b, max_agents) + x.shape[2:], np.int32)
        m = min(max_agents, x.shape[1])
        out[:, :m] = x[idx, :m]
        return out

    level = Level(
        holes=jnp.asarray(holes),
        starts=jnp.asarray(agent_rows(raw["starts"])),
        goals=jnp.asarray(agent_rows(raw["goals"])),
        size=jnp.asarray(n_all[idx], jnp.int32),
        n_agents=jnp.asarray(k_all[idx], jnp.int32),
        opt_makespan=jnp.asarray(raw["opt_makespan"][idx], jnp.int32),
        opt_soc=jnp.asarray(raw["opt_soc"][idx], jnp.int32),
        needs_wait=jnp.asarray(raw["needs_wait"][idx], jnp.int32),
    )
    n_cells = (n_all[idx] ** 2).astype(np.float64)
    meta = {
        "split": spec.name,
        "index": idx,
        "agents": k_all[idx],
        "size": n_all[idx],
        "subset": wr_all[idx],
        "subset_index": raw["subset_index"][idx].astype(np.int64),
        "needs_wait": raw["needs_wait"][idx].astype(bool),
        "hole_ratio": raw["holes"][idx].sum(axis=(1, 2)) / np.maximum(n_cells, 1.0),
        "kind": raw["kind"][idx].astype(np.int64),
        "opt_soc": raw["opt_soc"][idx].astype(np.int64),
        "opt_makespan": raw["opt_makespan"][idx].astype(np.int64),
        "plan_cells": agent_rows(raw["plan_cells"]),
        "plan_len": agent_rows(raw["plan_len"]),
    }
    return level, meta


def load_heldout(max_size: int = 10, max_agents: int = 5, agents=None, sizes=None,
                 subsets=None, path: str | Path | None = None,
                 split: str = HELDOUT) -> tuple[Level, dict]:
    """`load_split` with the held-out split by default (the historical entry point)."""
    return load_split(split, max_size, max_agents, agents, sizes, subsets, path)
