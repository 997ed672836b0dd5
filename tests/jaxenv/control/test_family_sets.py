"""The control families' frozen held-out and validation sets: shipped files regenerate byte
for byte and match their pinned sha256, they span the held-out ranges evenly, the two splits
share no variant, and the evaluator's success % and per-parameter bins are what they say."""

from __future__ import annotations

import hashlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxenv.control import ALL_NAMES, NAMES, family, make
from jaxenv.control.evaluate import evaluate_set, play
from jaxenv.control.sets import (
    HELDOUT,
    N_BINS,
    SPLITS,
    VALIDATION,
    bin_edges,
    build_arrays,
    data_path,
    load_set,
    npz_bytes,
    summarize,
)

CASES = [(n, s) for n in ALL_NAMES for s in SPLITS]


@pytest.mark.parametrize(("name", "split"), CASES)
def test_shipped_set_regenerates_byte_for_byte(name, split):
    shipped = data_path(name, split).read_bytes()
    assert hashlib.sha256(shipped).hexdigest() == SPLITS[split].file_sha256[name]
    assert npz_bytes(build_arrays(name, split)) == shipped


@pytest.mark.parametrize(("name", "split"), CASES)
def test_set_spans_the_held_out_ranges_evenly(name, split):
    levels, meta = load_set(name, split)
    fam = family(name)
    n = SPLITS[split].n
    assert meta["values"].shape == (n, len(fam.params))
    for k, p in enumerate(fam.params):
        m = meta["multipliers"][:, k]
        assert p.span[0] * (1 - 1e-6) <= m.min() and m.max() <= p.span[1] * (1 + 1e-6)
        np.testing.assert_allclose(np.asarray(getattr(levels, p.name)), meta["values"][:, k])
        counts = np.histogram(np.log(m), np.log(bin_edges(name, p.name)))[0]
        assert list(counts) == [n // N_BINS] * N_BINS, (p.name, counts)
        assert p.low <= meta["values"][:, k].min() and meta["values"][:, k].max() <= p.high


@pytest.mark.parametrize("name", ALL_NAMES)
def test_splits_share_no_variant(name):
    held = {r.tobytes() for r in load_set(name, HELDOUT)[1]["values"]}
    val = {r.tobytes() for r in load_set(name, VALIDATION)[1]["values"]}
    assert len(held) == SPLITS[HELDOUT].n and not held & val


def test_an_edited_file_is_refused(tmp_path):
    arrays = build_arrays("cartpole", HELDOUT)
    p = tmp_path / "x.npz"
    from jaxenv.control.sets import write_npz

    write_npz(p, {**arrays, "seed": np.int64(1)})
    with pytest.raises(ValueError, match="not the cartpole heldout split"):
        load_set("cartpole", HELDOUT, path=p)
    with pytest.raises(ValueError, match="unknown split"):
        load_set("cartpole", "test")


def test_summary_counts_and_bins():
    """summarize's overall and per-bin numbers are the plain means of the variants in them."""
    _, meta = load_set("cartpole", VALIDATION)
    n = len(meta["values"])
    rng = np.random.default_rng(0)
    succ, nret = rng.random(n) < 0.4, rng.random(n)
    out = summarize("cartpole", meta, succ, nret, outcome=np.zeros(n, int))
    assert out["n"] == n and np.isclose(out["success"], 100 * succ.mean())
    assert np.isclose(out["normalized_return"], nret.mean())
    assert out["outcomes"]["time_limit"] == 1.0
    k = list(meta["params"]).index("length")
    edges = bin_edges("cartpole", "length")
    for b, row in enumerate(out["by_param"]["length"]):
        m = (meta["multipliers"][:, k] >= edges[b]) & (meta["multipliers"][:, k] < edges[b + 1])
        if b == N_BINS - 1:
            m |= meta["multipliers"][:, k] >= edges[-1]
        assert row["n"] == m.sum() and np.isclose(row["success"], 100 * succ[m].mean())
        assert np.isclose(row["value_lo"], edges[b] * 0.5)
    with pytest.raises(ValueError, match="one result per variant"):
        summarize("cartpole", meta, succ[:-1], nret)


def test_evaluate_set_end_to_end():
    """A hand controller balances most CartPole variants; pushing always right balances
    none, and its episodes end by angle or position (never non-finite)."""
    env = make("cartpole")

    def pd(obs, key):
        x, xd, th, thd = obs
        return jnp.reshape((th + 0.3 * thd + 0.01 * x + 0.1 * xd > 0).astype(jnp.int32), (1,))

    def right(obs, key):
        return jnp.ones((1,), jnp.int32)

    good = evaluate_set(env, pd, jax.random.PRNGKey(0), VALIDATION)
    bad = evaluate_set(env, right, jax.random.PRNGKey(0), VALIDATION)
    assert good["success"] > 90 and good["normalized_return"] > 0.9
    assert bad["success"] == 0 and bad["normalized_return"] < 0.1
    assert bad["outcomes"]["angle"] + bad["outcomes"]["position"] == 1.0
    assert sum(r["n"] for r in bad["by_param"]["masspole"]) == SPLITS[VALIDATION].n


@pytest.mark.parametrize("name", NAMES)
def test_play_every_family_on_its_validation_set(name):
    env = make(name)
    levels, _ = load_set(name, VALIDATION)

    def zero(obs, key):
        return jnp.zeros((1,), jnp.float32 if env.continuous else jnp.int32)

    m = play(env, zero, levels, jax.random.PRNGKey(0))
    assert m["return"].shape == (SPLITS[VALIDATION].n,)
    assert np.all((m["normalized_return"] >= 0) & (m["normalized_return"] <= 1))
    assert not np.any(m["nonfinite"]) and np.all(m["outcome"] >= 0)


def test_the_script_refuses_a_folder_it_cannot_use(tmp_path, capsys):
    """scripts/make_control_sets.py: an --out it cannot make was a FileNotFoundError after
    building the first set, and --check silently ignored --out; both are one line now, and a
    writable --out gets every file."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "scripts" / "make_control_sets.py"
    spec = importlib.util.spec_from_file_location("make_control_sets", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    blocker = tmp_path / "file"
    blocker.write_text("")
    for argv, said in ((["--out", str(blocker / "sub")], "--out: cannot make the folder"),
                       (["--out", str(tmp_path), "--check"], "--check compares with the "
                                                              "shipped files; it takes no")):
        with pytest.raises(SystemExit) as e:
            script.main(argv)
        assert e.value.code == 2 and said in capsys.readouterr().err
    assert not list(tmp_path.glob("*.npz"))
