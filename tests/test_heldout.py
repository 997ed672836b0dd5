"""The shipped held-out benchmark: checksum, structure, exact labels, loader, regeneration."""

from __future__ import annotations

from collections import deque

import jax
import numpy as np
import pytest

from jaxenv.mapf.benchmark import build, heldout
from jaxenv.mapf.plans import verify_batch


@pytest.fixture(scope="module")
def raw():
    return heldout.load_arrays()


def test_file_checksums(raw):
    assert heldout.file_sha256() == heldout.FILE_SHA256
    assert heldout.content_sha256(raw, "instances") == heldout.INSTANCES_SHA256
    assert heldout.content_sha256(raw, "plans") == heldout.PLANS_SHA256
    assert heldout.data_path().stat().st_size < 2 * 1024 * 1024


def test_structure_and_quotas(raw):
    mb = build
    assert len(raw["size"]) == heldout.N_INSTANCES == 3150
    assert int(raw["seed"]) == mb.SEED and int(raw["version"]) == mb.VERSION
    assert tuple(raw["subsets"].tolist()) == heldout.SUBSETS
    k, n, si = (raw[x].astype(int) for x in ("n_agents", "size", "subset_index"))
    wait = raw["needs_wait"].astype(bool)
    cells = {}
    for key in zip(k, n, si, strict=True):
        cells[key] = cells.get(key, 0) + 1
    want = {(a, s, i) for a, sizes in mb.AGENT_SIZES.items() for s in sizes for i in range(3)}
    assert set(cells) == want and set(cells.values()) == {50}
    paper = {3: tuple(range(3, 11)), 4: tuple(range(4, 11)), 5: tuple(range(5, 11))}
    assert paper == mb.AGENT_SIZES
    for a, s, i in want:
        sel = (k == a) & (n == s) & (si == i)
        assert wait[sel].sum() == mb.wait_quota(i, a, s)
    for i, r in enumerate(heldout.SUBSETS):
        assert abs(wait[si == i].mean() - r) < 0.01
    # hole ratios within [0.1, 0.5] (small maps may be capped lower so 2k cells stay free)
    ratio = raw["holes"].sum(axis=(1, 2)) / (n * n)
    capped = (n * n - raw["holes"].sum(axis=(1, 2))) == 2 * k
    assert ((ratio >= 0.1) | capped).all() and (ratio <= 0.5).all()
    assert ratio[n >= 6].min() >= 0.1 and ratio[n >= 6].max() > 0.45
    assert np.isin(raw["kind"], [0, 1]).all()
    assert (raw["block_stats"][:, :2] == sorted((a, s) for a, ss in mb.AGENT_SIZES.items()
                                                for s in ss)).all()


def _bfs(holes: np.ndarray, n: int, src) -> dict:
    dist = {tuple(src): 0}
    q = deque([tuple(src)])
    while q:
        r, c = q.popleft()
        for v in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
            if 0 <= v[0] < n and 0 <= v[1] < n and not holes[v] and v not in dist:
                dist[v] = dist[(r, c)] + 1
                q.append(v)
    return dist


def test_instances_are_well_formed_and_plans_optimal(raw):
    levels, meta = heldout.load_heldout()
    assert levels.holes.shape == (3150, 10, 10) and meta["plan_cells"].shape[:2] == (3150, 5)
    out = jax.device_get(verify_batch(levels, meta["plan_cells"], meta["plan_len"],
                                      np.ones(3150, bool), cost="soc"))
    assert out.valid.all() and (out.reward == 1.0).all()
    assert (out.soc == meta["opt_soc"]).all() and (out.makespan >= meta["opt_makespan"]).all()
    mks = jax.device_get(verify_batch(levels, meta["plan_cells"], meta["plan_len"],
                                      np.ones(3150, bool)))
    assert (mks.optimal == (mks.makespan == meta["opt_makespan"])).all()
    # independent sanity: distinct on-ice starts/goals, reachable, costs above the bounds
    for i in range(0, 3150, 7):
        k, n = int(meta["agents"][i]), int(meta["size"][i])
        holes = np.asarray(raw["holes"][i, :n, :n])
        s, g = raw["starts"][i, :k].tolist(), raw["goals"][i, :k].tolist()
        cells = [tuple(c) for c in s + g]
        assert len(set(cells)) == 2 * k and not any(holes[c] for c in cells)
        d = [_bfs(holes, n, a).get(tuple(b)) for a, b in zip(s, g, strict=True)]
        assert None not in d
        assert meta["opt_makespan"][i] >= max(d) and meta["opt_soc"][i] >= sum(d)
        assert meta["opt_soc"][i] >= meta["opt_makespan"][i]
        if meta["needs_wait"][i]:
            paths = [meta["plan_cells"][i, a, : meta["plan_len"][i, a]] for a in range(k)]
            assert any((p[1:] == p[:-1]).all(-1).any() for p in paths)


def test_loader_filters_and_capacity():
    lv, meta = heldout.load_heldout(agents=[3], sizes=[3, 4], subsets=[0.25])
    assert len(meta["index"]) == 100 and set(meta["size"].tolist()) == {3, 4}
    assert (meta["agents"] == 3).all() and np.allclose(meta["subset"], 0.25)
    assert int(np.asarray(lv.needs_wait).sum()) == meta["needs_wait"].sum()
    lv, meta = heldout.load_heldout(max_size=8, max_agents=4)
    assert lv.holes.shape[1:] == (8, 8) and lv.starts.shape[1:] == (4, 2)
    assert meta["size"].max() == 8 and meta["agents"].max() == 4
    assert len(meta["index"]) == 50 * 3 * (6 + 5)
    lv, meta = heldout.load_heldout(max_size=12, max_agents=6, agents=5, sizes=10)
    assert lv.holes.shape == (150, 12, 12) and not np.asarray(lv.holes)[:, 10:].any()
    assert meta["plan_cells"].shape[1] == 6 and (meta["plan_len"][:, 5] == 0).all()
    with pytest.raises(ValueError, match="capacity"):
        heldout.load_heldout(max_size=8, sizes=[10])
    with pytest.raises(ValueError, match="capacity"):
        heldout.load_heldout(max_agents=3, agents=[4])


def test_regenerates_small_blocks_byte_for_byte(raw):
    """Instances, costs, labels and block stats byte for byte; the plan witnesses valid and
    SoC-optimal (byte-equal too unless the solver changed which optimal plan it returns)."""
    mb = build
    blocks = [(3, 3), (3, 4), (4, 4)]
    arrays, _ = mb.build(agents=[3, 4], sizes=[3, 4])
    k, n = raw["n_agents"].astype(int), raw["size"].astype(int)
    sel = np.zeros(len(k), bool)
    for a, s in blocks:
        sel |= (k == a) & (n == s)
    assert sel.sum() == len(arrays["size"]) == 450
    for name, value in arrays.items():
        shipped = raw[name]
        if name in heldout.PLAN_ARRAYS:
            continue
        if name == "block_stats":
            rows = [i for i, r in enumerate(shipped.tolist()) if tuple(r[:2]) in blocks]
            assert (shipped[rows] == value).all()
        elif shipped.ndim and shipped.shape[0] == len(k):
            assert shipped[sel].dtype == value.dtype and (shipped[sel] == value).all(), name
        else:
            assert (shipped == value).all(), name
    sliced = {name: raw[name][sel] for name in raw if raw[name].ndim and
              raw[name].shape[0] == len(k)}
    bad, differ = mb.check_witnesses(sliced, arrays)
    assert bad == 0
    # a regenerated witness from a broken plan would be caught: corrupt one and re-check
    broken = {**arrays, "plan_cells": arrays["plan_cells"].copy()}
    broken["plan_cells"][0, 0, 1:] = broken["plan_cells"][0, 0, 0]
    assert mb.check_witnesses(sliced, broken)[0] == 1
