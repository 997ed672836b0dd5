"""Build the frozen MAPF-FrozenLake splits (``jaxenv/data/heldout_v1.npz``, ``validation_v1.npz``).

The command line is ``scripts/make_benchmark.py`` (a thin wrapper of `main`). Independent of
the training code (numpy's RNG and the exact CBS solver, never the JAX generator), seeded per
(agents, size) block, so every block and every split regenerates byte for byte (``--check``).
The structure, the instance and wait-label rules, disjointness and determinism:
docs/splits.md.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import time
import zipfile
from collections import deque
from collections.abc import Collection
from fractions import Fraction
from multiprocessing import get_context
from pathlib import Path

import numpy as np

from jaxenv.mapf.benchmark.heldout import (
    AGENT_SIZES,
    HELDOUT,
    SPLITS,
    SplitSpec,
    content_sha256,
    data_path,
    instance_key,
    instance_keys,
    load_arrays,
    split_spec,
)
from jaxenv.mapf.solvers import cbs

VERSION = 1
SEED = SPLITS[HELDOUT].seed
SUBSETS = (0.25, 0.50, 0.75)
PER_CELL = SPLITS[HELDOUT].per_cell
HOLE_RANGE = (0.1, 0.5)
# CBS budgets: a cheap first try, then the full budget (both deterministic, no time limit).
STAGES = ((200, 20_000), (3_000, 60_000))
CROSSING_SHARE = 0.5  # at most this share of candidates are crossings (see the docstring)
MAX_ATTEMPTS = 50_000  # per (agents, size, subset); exceeding it is an error, not a skip
MAX_SIZE, MAX_AGENTS = 10, 5
DEFAULT_OUT = data_path()
RANDOM, CROSSING = 0, 1


def wait_quota(subset_index: int, k: int, n: int, per_cell: int = PER_CELL) -> int:
    """Waiting instances wanted in one (k, n, subset) cell: r * per_cell rounded to the
    nearest, a half alternating up and down over the blocks ((k + n) odd: up) so each subset's
    overall share stays at r (12/13 of 50 or 2/3 of 10 for r = 0.25)."""
    exact = Fraction(str(SUBSETS[subset_index])) * per_cell  # exact: no float ties
    lo = exact.numerator // exact.denominator
    frac = exact - lo
    if frac == Fraction(1, 2):
        return lo + (k + n) % 2
    return lo + int(frac > Fraction(1, 2))


def _largest_component(free: np.ndarray) -> np.ndarray:
    """Flat indices of the largest 4-connected ice component (ties: lowest cell index)."""
    n = free.shape[0]
    label = -np.ones(n * n, np.int64)
    best: list[int] = []
    flat = free.reshape(-1)
    for s in range(n * n):
        if not flat[s] or label[s] >= 0:
            continue
        comp = [s]
        label[s] = s
        queue = deque([s])
        while queue:
            u = queue.popleft()
            r, c = divmod(u, n)
            for v, ok in ((u - n, r > 0), (u + n, r < n - 1), (u - 1, c > 0), (u + 1, c < n - 1)):
                if ok and flat[v] and label[v] < 0:
                    label[v] = s
                    comp.append(v)
                    queue.append(v)
        if len(comp) > len(best):
            best = comp
    return np.array(sorted(best), np.int64)


def _holes(rng: np.random.Generator, n: int, n_cells_needed: int, protect: np.ndarray):
    """round(ratio * n^2) holes for ratio ~ U[0.1, 0.5], kept within [0.1, 0.5] of the cells
    and capped so that ``n_cells_needed`` ice cells remain; never on ``protect``."""
    ratio = rng.uniform(*HOLE_RANGE)
    allowed = np.flatnonzero(~protect.reshape(-1))
    lo, hi = int(np.ceil(HOLE_RANGE[0] * n * n)), int(np.floor(HOLE_RANGE[1] * n * n))
    n_holes = min(max(lo, min(hi, int(round(ratio * n * n)))), n * n - n_cells_needed,
                  len(allowed))
    holes = np.zeros(n * n, bool)
    holes[rng.permutation(allowed)[:n_holes]] = True
    return holes.reshape(n, n)


def random_candidate(rng: np.random.Generator, n: int, k: int):
    """Holes, then 2k distinct cells of the largest ice component; None if it is too small."""
    holes = _holes(rng, n, 2 * k, np.zeros((n, n), bool))
    comp = _largest_component(~holes)
    if len(comp) < 2 * k:
        return None
    pick = comp[rng.permutation(len(comp))[: 2 * k]]
    cells = np.stack(np.divmod(pick, n), -1)
    return holes, cells[:k], cells[k:]


def crossing_candidate(rng: np.random.Generator, n: int, k: int):
    """Two agents on straight segments meeting at one cell at the same time (module doc)."""
    xr, xc = (int(v) for v in rng.integers(1, n - 1, size=2))
    sh, sv = (int(v) for v in rng.choice([-1, 1], size=2))
    room = lambda x, sign: n - 1 - x if sign > 0 else x  # noqa: E731
    d = int(rng.integers(1, min(room(xc, -sh), room(xr, -sv)) + 1))
    b = int(rng.integers(1, room(xc, sh) + 1))
    c = int(rng.integers(1, room(xr, sv) + 1))
    s_row, g_row = (xr, xc - sh * d), (xr, xc + sh * b)
    s_col, g_col = (xr - sv * d, xc), (xr + sv * c, xc)
    protect = np.zeros((n, n), bool)
    protect[xr, min(s_row[1], g_row[1]): max(s_row[1], g_row[1]) + 1] = True
    protect[min(s_col[0], g_col[0]): max(s_col[0], g_col[0]) + 1, xc] = True
    holes = _holes(rng, n, int(protect.sum()) + 2 * (k - 2), protect)
    comp = _largest_component(~holes)
    if xr * n + xc not in set(comp.tolist()):
        return None
    fixed = {s_row[0] * n + s_row[1], g_row[0] * n + g_row[1], s_col[0] * n + s_col[1],
             g_col[0] * n + g_col[1]}
    rest = np.array([v for v in comp if v not in fixed], np.int64)
    if len(rest) < 2 * (k - 2):
        return None
    pick = rest[rng.permutation(len(rest))[: 2 * (k - 2)]]
    cells = np.stack(np.divmod(pick, n), -1)
    starts = np.concatenate([[s_row, s_col], cells[: k - 2]]).astype(np.int64)
    goals = np.concatenate([[g_row, g_col], cells[k - 2:]]).astype(np.int64)
    order = rng.permutation(k)
    return holes, starts[order], goals[order]


def solve_staged(holes: np.ndarray, starts: np.ndarray, goals: np.ndarray):
    """``cbs.solve`` under each budget of STAGES in turn; raises if the last one runs out.

    With the searches run one after another, CBS would spend its whole node budget on an
    unsolvable or crowded instance before the joint search gets a turn; a small first budget
    lets the joint search settle those quickly.
    """
    s = [tuple(map(int, c)) for c in starts]
    g = [tuple(map(int, c)) for c in goals]
    for i, (nodes, states) in enumerate(STAGES):
        try:
            return cbs.solve(holes, s, g, max_nodes=nodes, max_states=states)
        except cbs.SolverBudgetExceeded:
            if i == len(STAGES) - 1:
                raise
    raise AssertionError("unreachable")


def generate_block(k: int, n: int, seed: int = SEED, per_cell: int = PER_CELL,
                   exclude: frozenset[bytes] = frozenset()) -> dict[str, object]:
    """All three subsets of one (agents, size) block, in a plain dict of lists.

    ``exclude``: `instance_key`s of instances another split already holds; such candidates
    are skipped (counted as ``excluded``) so the splits stay disjoint.
    """
    rng = np.random.default_rng([seed, k, n])
    out: dict[str, list] = {key: [] for key in (
        "holes", "starts", "goals", "soc", "makespan", "needs_wait", "paths", "kind",
        "subset_index")}
    seen: set[bytes] = set()
    stats = {"attempts": 0, "skipped_budget": 0, "unsolvable": 0, "rejected_layout": 0,
             "duplicates": 0, "excluded": 0, "seconds": 0.0}
    t0 = time.perf_counter()
    for si in range(len(SUBSETS)):
        quota = wait_quota(si, k, n, per_cell)
        want = {True: quota, False: per_cell - quota}
        attempts = 0
        while want[True] or want[False]:
            attempts += 1
            if attempts > MAX_ATTEMPTS:
                raise RuntimeError(f"block ({k}, {n}) subset {SUBSETS[si]}: quotas not "
                                   f"filled after {MAX_ATTEMPTS} candidates: {want}")
            p_cross = CROSSING_SHARE * want[True] / (want[True] + want[False])
            kind = CROSSING if rng.random() < p_cross else RANDOM
            cand = (crossing_candidate if kind == CROSSING else random_candidate)(rng, n, k)
            if cand is None:
                stats["rejected_layout"] += 1
                continue
            holes, starts, goals = cand
            key = holes.tobytes() + starts.astype(np.int8).tobytes() + goals.astype(
                np.int8).tobytes()
            if key in seen:
                stats["duplicates"] += 1
                continue
            if exclude and instance_key(holes, starts, goals) in exclude:
                stats["excluded"] += 1
                continue
            try:
                sol = solve_staged(holes, starts, goals)
            except cbs.SolverBudgetExceeded:
                stats["skipped_budget"] += 1
                continue
            if sol is None:
                stats["unsolvable"] += 1
                continue
            label = bool(sol.needs_wait)
            if want[label] == 0:
                continue
            want[label] -= 1
            seen.add(key)
            for name, value in (("holes", holes), ("starts", starts), ("goals", goals),
                                ("soc", sol.soc), ("makespan", sol.makespan),
                                ("needs_wait", label), ("paths", sol.paths),
                                ("kind", kind), ("subset_index", si)):
                out[name].append(value)
        stats["attempts"] += attempts
    stats["seconds"] = time.perf_counter() - t0
    out["stats"] = stats
    out["k"], out["n"] = k, n
    return out


STAT_KEYS = ("attempts", "skipped_budget", "unsolvable", "rejected_layout", "duplicates")


def stat_keys(spec: SplitSpec) -> tuple[str, ...]:
    """The ``block_stats`` columns after (agents, size): ``excluded`` only for a split that
    must avoid others (the held-out file's layout predates it and may not change)."""
    return STAT_KEYS + ("excluded",) if spec.disjoint_from else STAT_KEYS


def assemble(blocks: list[dict[str, object]], seed: int,
             stat_names: tuple[str, ...] = STAT_KEYS) -> dict[str, np.ndarray]:
    """Padded arrays of all instances, blocks in (agents, size) order."""
    rows = []
    blocks = sorted(blocks, key=lambda b: (b["k"], b["n"]))
    for blk in blocks:
        for i in range(len(blk["soc"])):
            rows.append((blk["k"], blk["n"], {key: blk[key][i] for key in (
                "holes", "starts", "goals", "soc", "makespan", "needs_wait", "paths", "kind",
                "subset_index")}))
    m = len(rows)
    horizon = max(len(p) for _, _, r in rows for p in r["paths"])
    arr = {
        "holes": np.zeros((m, MAX_SIZE, MAX_SIZE), bool),
        "starts": np.zeros((m, MAX_AGENTS, 2), np.int8),
        "goals": np.zeros((m, MAX_AGENTS, 2), np.int8),
        "size": np.zeros(m, np.int8),
        "n_agents": np.zeros(m, np.int8),
        "subset_index": np.zeros(m, np.int8),
        "opt_soc": np.zeros(m, np.int16),
        "opt_makespan": np.zeros(m, np.int16),
        "needs_wait": np.zeros(m, np.int8),
        "kind": np.zeros(m, np.int8),
        "plan_cells": np.zeros((m, MAX_AGENTS, horizon, 2), np.int8),
        "plan_len": np.zeros((m, MAX_AGENTS), np.int16),
    }
    for i, (k, n, r) in enumerate(rows):
        arr["holes"][i, :n, :n] = r["holes"]
        arr["starts"][i, :k] = r["starts"]
        arr["goals"][i, :k] = r["goals"]
        arr["size"][i], arr["n_agents"][i] = n, k
        arr["subset_index"][i] = r["subset_index"]
        arr["opt_soc"][i], arr["opt_makespan"][i] = r["soc"], r["makespan"]
        arr["needs_wait"][i], arr["kind"][i] = int(r["needs_wait"]), r["kind"]
        for a, path in enumerate(r["paths"]):
            p = np.asarray(path, np.int8).reshape(-1, 2)
            arr["plan_cells"][i, a, : len(p)] = p
            arr["plan_cells"][i, a, len(p):] = p[-1]
            arr["plan_len"][i, a] = len(p)
    arr["subsets"] = np.asarray(SUBSETS, np.float32)
    arr["version"] = np.int32(VERSION)
    arr["seed"] = np.int64(seed)
    arr["budget"] = np.asarray(STAGES, np.int64)
    # per block: agents, size, then stat_names (deterministic counts; no timings)
    arr["block_stats"] = np.asarray([[b["k"], b["n"]] + [b["stats"][key] for key in stat_names]
                                     for b in blocks], np.int64)
    return arr


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """A compressed .npz readable by ``np.load``, with fixed zip timestamps (reproducible)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for name in sorted(arrays):
            member = io.BytesIO()
            np.lib.format.write_array(member, np.asarray(arrays[name]), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, member.getvalue(), compresslevel=9)
    path.write_bytes(buf.getvalue())


def witness_paths(arrays: dict[str, np.ndarray], i: int) -> list[list[tuple[int, int]]]:
    k = int(arrays["n_agents"][i])
    return [[(int(r), int(c)) for r, c in arrays["plan_cells"][i, a, : arrays["plan_len"][i, a]]]
            for a in range(k)]


def check_witnesses(shipped: dict[str, np.ndarray], arrays: dict[str, np.ndarray]):
    """(regenerated plans that are not valid and SoC-optimal for the shipped instances, plans
    that differ from the shipped ones); uses the plain-Python reference checker."""
    from jaxenv.mapf.solvers.reference import ref_check_plan

    bad = differ = 0
    for i in range(len(arrays["size"])):
        paths = witness_paths(arrays, i)
        k, n = int(shipped["n_agents"][i]), int(shipped["size"][i])
        res = ref_check_plan(size=n, holes=shipped["holes"][i].tolist(),
                             starts=shipped["starts"][i, :k].tolist(),
                             goals=shipped["goals"][i, :k].tolist(), plan=paths, n_agents=k)
        bad += not (res["valid"] and res["soc"] == int(shipped["opt_soc"][i]))
        differ += paths != witness_paths(shipped, i)
    return bad, differ


def exclusion_keys(spec: SplitSpec) -> dict[tuple[int, int], frozenset[bytes]]:
    """Per (agents, size) block, the `instance_key`s of the shipped splits that ``spec`` must
    avoid; each file's instance checksum is verified first, so the exclusions are frozen too."""
    keys: dict[tuple[int, int], set[bytes]] = {}
    for other in map(split_spec, spec.disjoint_from):
        arrays = load_arrays(split=other.name)
        if content_sha256(arrays, "instances") != other.instances_sha256:
            raise RuntimeError(f"{data_path(other.name)} does not match its instance checksum; "
                               f"the {spec.name} split cannot be built disjoint from it")
        for i, key in enumerate(instance_keys(arrays)):
            block = (int(arrays["n_agents"][i]), int(arrays["size"][i]))
            keys.setdefault(block, set()).add(key)
    return {block: frozenset(v) for block, v in keys.items()}


def _block_job(args: tuple[int, int, int, int, frozenset[bytes]]) -> dict[str, object]:
    k, n, seed, per_cell, exclude = args
    return generate_block(k, n, seed, per_cell, exclude)


def build(agents: Collection[int] | None = None, sizes: Collection[int] | None = None,
          seed: int | None = None, workers: int = 1, verbose: bool = False,
          split: str = HELDOUT) -> tuple[dict[str, np.ndarray], dict[tuple[int, int], dict]]:
    """Arrays of the requested blocks (all by default) of a split and the per-block stats.

    ``seed`` defaults to the split's own (another seed builds an experimental variant; the
    exclusions still apply)."""
    spec = split_spec(split)
    seed = spec.seed if seed is None else seed
    excl = exclusion_keys(spec) if spec.disjoint_from else {}
    jobs = [(k, n, seed, spec.per_cell, excl.get((k, n), frozenset()))
            for k, ns in AGENT_SIZES.items() for n in ns
            if (agents is None or k in agents) and (sizes is None or n in sizes)]
    if not jobs:
        raise ValueError("no (agents, size) block selected")
    # Largest blocks first, so the parallel pool finishes together.
    jobs.sort(key=lambda j: -(j[0] * j[1] * j[1]))
    if workers > 1:
        with get_context("spawn").Pool(workers) as pool:
            blocks = pool.map(_block_job, jobs, chunksize=1)
    else:
        blocks = [_block_job(j) for j in jobs]
    if verbose:
        for b in sorted(blocks, key=lambda b: (b["k"], b["n"])):
            print(f"  agents {b['k']} size {b['n']:2d}: {b['stats']}", flush=True)
    return (assemble(blocks, seed, stat_keys(spec)),
            {(b["k"], b["n"]): b["stats"] for b in blocks})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split", choices=tuple(SPLITS), default=HELDOUT,
                    help="which frozen split to build (seed, instances per cell, file)")
    ap.add_argument("--out", type=Path, default=None,
                    help="default: the split's shipped file under jaxenv/data/")
    ap.add_argument("--seed", type=int, default=None, help="default: the split's seed")
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--agents", type=int, nargs="*")
    ap.add_argument("--sizes", type=int, nargs="*")
    ap.add_argument("--check", action="store_true",
                    help="regenerate and compare with --out instead of writing it")
    args = ap.parse_args(argv)
    if args.workers < 1:
        ap.error(f"--workers: at least 1, got {args.workers}")
    blocks = [(k, n) for k, ns in AGENT_SIZES.items() for n in ns
              if (args.agents is None or k in args.agents)
              and (args.sizes is None or n in args.sizes)]
    if not blocks:
        ap.error("--agents/--sizes select no block of the split (agent counts: map sizes "
                 + "; ".join(f"{k}: {min(ns)}-{max(ns)}" for k, ns in AGENT_SIZES.items())
                 + ")")
    out = args.out or data_path(args.split)
    seed = SPLITS[args.split].seed if args.seed is None else args.seed
    print(f"split {args.split}: seed {seed}, "
          f"{SPLITS[args.split].per_cell} per cell", flush=True)
    t0 = time.perf_counter()
    arrays, _ = build(args.agents, args.sizes, args.seed, args.workers, verbose=True,
                      split=args.split)
    secs = time.perf_counter() - t0
    digest = content_sha256(arrays, "instances")
    wait = arrays["needs_wait"].astype(bool)
    print(f"{len(wait)} instances in {secs:.1f} s with {args.workers} worker(s); sha256 of "
          f"instances {digest}, of plans {content_sha256(arrays, 'plans')}")
    for si, r in enumerate(SUBSETS):
        sel = arrays["subset_index"] == si
        print(f"  subset {r:.2f}: {sel.sum()} instances, needs-wait share "
              f"{wait[sel].mean():.4f}")
    if args.check:
        with np.load(out) as f:
            shipped = {name: f[name] for name in f.files}
        same = content_sha256(shipped, "instances") == digest
        print(("instances, costs and labels match " if same else "instances DIFFER from ")
              + str(out))
        if same:
            bad, differ = check_witnesses(shipped, arrays)
            print(f"plan witnesses: {differ} differ from the shipped ones (another optimal "
                  f"plan: the solver changed), {bad} not valid and SoC-optimal")
            same = bad == 0
        return 0 if same else 1
    write_npz(out, arrays)
    print(f"wrote {out} ({out.stat().st_size / 1024:.0f} KiB), file sha256 "
          f"{hashlib.sha256(out.read_bytes()).hexdigest()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
