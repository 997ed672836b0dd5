"""The shipped frozen splits (held-out, validation): checksums, structure, exact labels,
disjointness, loader, regeneration from the seed."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from jaxenv.mapf.benchmark import build, heldout
from jaxenv.mapf.plans import verify_batch
from tests.jaxenv.mapf.plain_mapf import distances

SPLITS = ("heldout", "validation")


@pytest.fixture(scope="module")
def raw():
    return heldout.load_arrays()


@pytest.fixture(scope="module")
def raws():
    return {name: heldout.load_arrays(split=name) for name in SPLITS}


def test_split_specs():
    assert tuple(heldout.SPLITS) == SPLITS
    held, val = heldout.SPLITS["heldout"], heldout.SPLITS["validation"]
    assert (held.seed, held.per_cell, held.n_instances) == (20260617, 50, 3150)
    assert (val.per_cell, val.n_instances) == (10, 630) and val.seed != held.seed
    assert val.disjoint_from == ("heldout",) and held.disjoint_from == ()
    assert held.file_sha256 == heldout.FILE_SHA256 and heldout.N_INSTANCES == 3150
    assert held.seed == build.SEED and build.PER_CELL == 50
    assert heldout.data_path("validation").name == "validation_v1.npz"
    assert heldout.data_path() == heldout.data_path("heldout")
    with pytest.raises(ValueError, match="unknown split 'test'"):
        heldout.split_spec("test")


@pytest.mark.parametrize("split", SPLITS)
def test_file_checksums(raws, split):
    spec = heldout.SPLITS[split]
    assert heldout.file_sha256(split=split) == spec.file_sha256
    assert heldout.content_sha256(raws[split], "instances") == spec.instances_sha256
    assert heldout.content_sha256(raws[split], "plans") == spec.plans_sha256
    assert heldout.data_path(split).stat().st_size < 2 * 1024 * 1024


def test_wait_quota_rule():
    """r * per_cell, halves alternating with the block's parity; 50 keeps the historical
    quotas, 10 gets 2/3, 5, 7/8, and a non-half fraction rounds to the nearest."""
    for k, n in ((3, 3), (3, 4)):
        odd = (k + n) % 2
        assert [build.wait_quota(i, k, n) for i in range(3)] == [12 + odd, 25, 37 + odd]
        assert [build.wait_quota(i, k, n, 10) for i in range(3)] == [2 + odd, 5, 7 + odd]
        assert [build.wait_quota(i, k, n, 7) for i in range(3)] == [2, 3 + odd, 5]
        assert [build.wait_quota(i, k, n, 4) for i in range(3)] == [1, 2, 3]


@pytest.mark.parametrize("split", SPLITS)
def test_structure_and_quotas(raws, split):
    mb, spec, raw = build, heldout.SPLITS[split], raws[split]
    assert len(raw["size"]) == spec.n_instances == 63 * spec.per_cell
    assert int(raw["seed"]) == spec.seed and int(raw["version"]) == mb.VERSION
    assert tuple(raw["subsets"].tolist()) == heldout.SUBSETS
    k, n, si = (raw[x].astype(int) for x in ("n_agents", "size", "subset_index"))
    wait = raw["needs_wait"].astype(bool)
    cells = {}
    for key in zip(k, n, si, strict=True):
        cells[key] = cells.get(key, 0) + 1
    want = {(a, s, i) for a, sizes in mb.AGENT_SIZES.items() for s in sizes for i in range(3)}
    assert set(cells) == want and set(cells.values()) == {spec.per_cell}
    paper = {3: tuple(range(3, 11)), 4: tuple(range(4, 11)), 5: tuple(range(5, 11))}
    assert paper == mb.AGENT_SIZES
    for a, s, i in want:
        sel = (k == a) & (n == s) & (si == i)
        assert wait[sel].sum() == mb.wait_quota(i, a, s, spec.per_cell)
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
    assert raw["block_stats"].shape[1] == 2 + len(mb.stat_keys(spec))


@pytest.mark.parametrize("split", SPLITS)
def test_instances_are_well_formed_and_plans_optimal(raws, split):
    raw, m = raws[split], heldout.SPLITS[split].n_instances
    levels, meta = heldout.load_split(split)
    assert meta["split"] == split
    assert levels.holes.shape == (m, 10, 10) and meta["plan_cells"].shape[:2] == (m, 5)
    out = jax.device_get(verify_batch(levels, meta["plan_cells"], meta["plan_len"],
                                      np.ones(m, bool), cost="soc"))
    assert out.valid.all() and (out.reward == 1.0).all()
    assert (out.soc == meta["opt_soc"]).all() and (out.makespan >= meta["opt_makespan"]).all()
    mks = jax.device_get(verify_batch(levels, meta["plan_cells"], meta["plan_len"],
                                      np.ones(m, bool)))
    assert (mks.optimal == (mks.makespan == meta["opt_makespan"])).all()
    # independent sanity: distinct on-ice starts/goals, reachable, costs above the bounds
    for i in range(0, m, 7 if m > 1000 else 1):
        k, n = int(meta["agents"][i]), int(meta["size"][i])
        holes = np.asarray(raw["holes"][i, :n, :n])
        s, g = raw["starts"][i, :k].tolist(), raw["goals"][i, :k].tolist()
        cells = [tuple(c) for c in s + g]
        assert len(set(cells)) == 2 * k and not any(holes[c] for c in cells)
        d = [distances(holes, n, a).get(tuple(b)) for a, b in zip(s, g, strict=True)]
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


def test_loader_splits(raws):
    """load_split / load_heldout(split=...) read the named file, filter alike and say which
    split the rows came from; a file of another split is refused rather than mislabelled."""
    lv, meta = heldout.load_split("validation", agents=[3], sizes=[3, 4], subsets=[0.25])
    assert meta["split"] == "validation" and len(meta["index"]) == 20
    assert set(meta["size"].tolist()) == {3, 4} and np.allclose(meta["subset"], 0.25)
    assert int(np.asarray(lv.needs_wait).sum()) == meta["needs_wait"].sum() == 2 + 3
    val = raws["validation"]
    assert (np.asarray(lv.opt_soc) == val["opt_soc"][meta["index"]]).all()
    lv2, meta2 = heldout.load_heldout(agents=[3], sizes=[3, 4], subsets=[0.25],
                                      split="validation")
    assert meta2["split"] == "validation" and (meta2["index"] == meta["index"]).all()
    assert (np.asarray(lv2.holes) == np.asarray(lv.holes)).all()
    assert heldout.load_heldout(agents=[3], sizes=[3])[1]["split"] == "heldout"
    lv, meta = heldout.load_split("validation", max_size=8, max_agents=4)
    assert len(meta["index"]) == 10 * 3 * (6 + 5) and lv.holes.shape[1:] == (8, 8)
    with pytest.raises(ValueError, match="capacity"):
        heldout.load_split("validation", max_size=8, sizes=[10])
    with pytest.raises(ValueError, match="unknown split"):
        heldout.load_split("train")
    with pytest.raises(ValueError, match="seed 20260617, not the validation split"):
        heldout.load_split("validation", path=heldout.data_path("heldout"))


def test_instance_key():
    holes = np.zeros((4, 4), bool)
    holes[1, 2] = True
    s, g = np.array([[0, 0], [3, 3], [0, 3]]), np.array([[3, 0], [0, 1], [2, 2]])
    key = heldout.instance_key(holes, s, g)
    perm = [2, 0, 1]
    assert heldout.instance_key(holes, s[perm], g[perm]) == key  # agents relabelled
    assert heldout.instance_key(holes, g, s) != key  # starts and goals swapped
    assert heldout.instance_key(holes, s[:, ::-1], g[:, ::-1]) != key  # transposed cells
    other = holes.copy()
    other[3, 1] = True
    assert heldout.instance_key(other, s, g) != key
    big = np.zeros((5, 5), bool)
    big[1, 2] = True
    assert heldout.instance_key(big, s, g) != key


def test_validation_is_disjoint_from_heldout(raws):
    held, val = raws["heldout"], raws["validation"]
    held_keys = set(heldout.instance_keys(held))
    val_keys = heldout.instance_keys(val)
    # the frozen held-out file has 4 agent relabellings among its 150 3x3 3-agent instances
    # (its duplicate check predates instance_key); the validation split has none
    assert len(held_keys) == 3146 and len(set(val_keys)) == 630
    assert not held_keys & set(val_keys)
    # the builder did meet held-out instances and skipped them (column "excluded")
    cols = ("agents", "size") + build.stat_keys(heldout.SPLITS["validation"])
    stats = dict(zip(cols, val["block_stats"].T, strict=True))
    assert stats["excluded"].sum() >= 1


def test_builder_skips_excluded_instances():
    """Without the exclusions, validation block (3, 3) would repeat a held-out instance: the
    skip is what keeps the splits apart, and it is deterministic."""
    spec = heldout.SPLITS["validation"]
    excl = build.exclusion_keys(spec)[(3, 3)]
    assert len(excl) == 146  # 150 instances, 4 of them relabelled copies (see above)
    keys = lambda b: [heldout.instance_key(h, s, g) for h, s, g in  # noqa: E731
                      zip(b["holes"], b["starts"], b["goals"], strict=True)]
    free = build.generate_block(3, 3, spec.seed, spec.per_cell)
    assert set(keys(free)) & excl and free["stats"]["excluded"] == 0
    kept = build.generate_block(3, 3, spec.seed, spec.per_cell, excl)
    assert not set(keys(kept)) & excl and kept["stats"]["excluded"] >= 1
    again = build.generate_block(3, 3, spec.seed, spec.per_cell, excl)
    assert keys(again) == keys(kept) and again["stats"]["attempts"] == kept["stats"]["attempts"]


@pytest.mark.parametrize(("split", "blocks"), [
    ("heldout", [(3, 3), (3, 4), (4, 4)]),
    ("validation", [(3, 3), (3, 4)]),
])
def test_regenerates_small_blocks_byte_for_byte(raws, split, blocks):
    """Instances, costs, labels and block stats byte for byte; the plan witnesses valid and
    SoC-optimal (byte-equal too unless the solver changed which optimal plan it returns)."""
    mb, raw, spec = build, raws[split], heldout.SPLITS[split]
    agents, sizes = sorted({a for a, _ in blocks}), sorted({s for _, s in blocks})
    arrays, _ = mb.build(agents=agents, sizes=sizes, split=split)
    k, n = raw["n_agents"].astype(int), raw["size"].astype(int)
    sel = np.zeros(len(k), bool)
    for a, s in blocks:
        sel |= (k == a) & (n == s)
    assert sel.sum() == len(arrays["size"]) == len(blocks) * 3 * spec.per_cell
    for name, value in arrays.items():
        shipped = raw[name]
        if name in heldout.PLAN_ARRAYS:
            continue
        if name == "block_stats":
            rows = [i for i, r in enumerate(shipped.tolist()) if tuple(r[:2]) in blocks]
            assert shipped[rows].shape == value.shape and (shipped[rows] == value).all()
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


def test_cli_split_writes_and_checks(tmp_path, capsys):
    out = tmp_path / "val_3x3.npz"
    argv = ["--split", "validation", "--agents", "3", "--sizes", "3", "--workers", "1"]
    assert build.main(argv + ["--out", str(out)]) == 0
    written = heldout.load_arrays(out)
    assert int(written["seed"]) == heldout.SPLITS["validation"].seed
    assert len(written["size"]) == 30
    assert build.main(argv + ["--out", str(out), "--check"]) == 0
    other = tmp_path / "held_3x3.npz"
    assert build.main(["--agents", "3", "--sizes", "3", "--workers", "1", "--out", str(other)]) == 0
    assert build.main(argv + ["--out", str(other), "--check"]) == 1
    assert "instances DIFFER" in capsys.readouterr().out


@pytest.mark.parametrize("argv, said", [
    (["--workers", "0"], "--workers: at least 1, got 0"),
    (["--agents", "2"], "--agents/--sizes select no block of the split (agent counts: map sizes "
                        "3: 3-10; 4: 4-10; 5: 5-10)"),
    (["--agents", "5", "--sizes", "3", "4"], "select no block"),
])
def test_cli_refuses_an_empty_selection_before_building(argv, said, tmp_path, capsys):
    """A selection of no block was a ValueError from inside the builder, and no workers a
    pool that never starts: both are the parser's one-line error, and nothing is written."""
    out = tmp_path / "x.npz"
    with pytest.raises(SystemExit) as e:
        build.main([*argv, "--out", str(out)])
    assert e.value.code == 2 and said in capsys.readouterr().err and not out.exists()
