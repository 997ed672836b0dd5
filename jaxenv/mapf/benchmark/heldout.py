"""The frozen held-out benchmark: 3,150 MAPF-FrozenLake instances with exact optimal costs.

Built by ``scripts/make_benchmark.py`` (numpy RNG + the exact CBS solver, independent of the
training generator) and shipped as ``jaxenv/data/heldout_v1.npz``; never used for training.

Structure (the paper's): 3 agents on sizes 3-10, 4 agents on 4-10, 5 agents on 5-10; three
wait-ratio subsets 0.25 / 0.50 / 0.75, in which that share of instances *needs a wait* (every
SoC-optimal plan has an agent stay somewhere before its final arrival); hole ratios drawn from
0.1-0.5 (capped on small maps so that 2k distinct start/goal cells fit); 50 instances per
(agents, size, subset). Each instance stores the exact optimal sum of costs and makespan and
one SoC-optimal plan.
"""

from __future__ import annotations

import hashlib
from importlib import resources
from pathlib import Path

import jax.numpy as jnp
import numpy as np

from jaxenv.mapf.level import Level

FILE_NAME = "heldout_v1.npz"
SUBSETS = (0.25, 0.50, 0.75)
KINDS = ("random", "crossing")  # how the candidate was drawn (see scripts/make_benchmark.py)
N_INSTANCES = 3150
# The stored plan is a *witness* (one SoC-optimal plan among possibly many): which one the
# solver returns may change with the solver's version, the instances, costs and labels may not.
PLAN_ARRAYS = ("plan_cells", "plan_len")
# sha256 of the shipped file's bytes; of its instance arrays (everything but the plans: grids,
# starts, goals, sizes, subsets, costs, labels, kinds, block stats); of its plan arrays.
FILE_SHA256 = "fb20a1aabfe13b483a645406300c00c0faa1d8393df8aa0716f52e5c207b63bb"
INSTANCES_SHA256 = "1590e32a8bd8bef757bf36cda3dcb81259e2efe6b0ddadb3b9563410e4887a52"
PLANS_SHA256 = "9430d89f7de104f78e8060b013dfee118033bc2bc8978ecba800c038dbadb8ff"


def data_path() -> Path:
    """Where the shipped file is (inside the installed package)."""
    return Path(str(resources.files("jaxenv") / "data" / FILE_NAME))


def file_sha256(path: str | Path | None = None) -> str:
    return hashlib.sha256(Path(path or data_path()).read_bytes()).hexdigest()


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


def load_arrays(path: str | Path | None = None) -> dict[str, np.ndarray]:
    """The raw arrays of the file (unpadded dtypes, max_size 10, max_agents 5)."""
    with np.load(path or data_path(), allow_pickle=False) as f:
        return {name: f[name] for name in f.files}


def _select(values: np.ndarray, wanted, what: str, close: bool = False) -> np.ndarray:
    if wanted is None:
        return np.ones(values.shape, bool)
    wanted = np.atleast_1d(np.asarray(wanted, float if close else np.int64))
    if close:
        return np.any(np.isclose(values[:, None], wanted[None, :]), axis=1)
    return np.isin(values, wanted)


def load_heldout(max_size: int = 10, max_agents: int = 5, agents=None, sizes=None,
                 subsets=None, path: str | Path | None = None) -> tuple[Level, dict]:
    """The held-out set as a batched ``Level`` (padded to max_size / max_agents) and metadata.

    Filters: ``agents`` (e.g. ``[3]``), ``sizes`` (e.g. ``range(3, 7)``), ``subsets``
    (wait ratios, e.g. ``[0.25]``). Without explicit filters, instances that do not fit the
    capacity (size > max_size or more agents than max_agents) are left out; asking for them
    explicitly raises ``ValueError``. Order: file order (agents, size, subset, draw).

    meta (numpy, one row per instance): ``index`` (row in the file), ``agents``, ``size``,
    ``subset`` (wait ratio), ``subset_index``, ``needs_wait`` (bool), ``hole_ratio``, ``kind``
    (index into KINDS), ``opt_soc``, ``opt_makespan``, and the stored SoC-optimal plan as
    ``plan_cells [B, max_agents, T, 2] int32`` (rows padded by their last cell) and
    ``plan_len [B, max_agents] int32`` (0 for absent agents): ready for
    ``jaxenv.mapf.plans.verify_batch``.
    """
    raw = load_arrays(path)
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
