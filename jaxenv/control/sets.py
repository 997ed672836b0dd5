"""Frozen physics variants per family: a held-out set (reported numbers) and a validation set
(the engineer's context and any tuning), shipped under ``jaxenv/data/`` and regenerable byte for
byte by ``scripts/make_control_sets.py``.

A set is a Latin hypercube over the whole space the engineer can ask for: each parameter's
knob bounds (`Param.span`, as multipliers of the standard value; e.g. CartPole's half pole
length 0.1-2 m, x0.2-4). Narrower spans make no test: a policy trained on the standard task
alone already solves nearly all of them (docs/experiments/families.md). Per parameter the N
variants fall one in each of N equal strata of log(multiplier), randomly paired across
parameters. So every
parameter's range is covered evenly (each of `N_BINS` bins holds exactly N / N_BINS variants,
which makes the per-parameter breakdown balanced) and joint extremes appear too. numpy's RNG
only (``default_rng([seed, family index])``), never the training generator; the two splits of
a family have different seeds, so they share no variant.

`summarize` turns per-variant results (success, normalised return, outcome; from
`jaxenv.control.evaluate.play` or the trainee's evaluator on `load_set`'s levels) into success
%, mean normalised return, the outcome shares and the per-parameter bins.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from jaxenv.control.registry import ALL_NAMES, family

HELDOUT, VALIDATION = "heldout", "validation"
N_BINS = 4


@dataclass(frozen=True)
class SetSpec:
    """One frozen split of one family: how it is drawn and the checksum that pins its file."""

    split: str
    seed: int
    n: int  # variants (a multiple of N_BINS)
    file_sha256: dict[str, str]  # per family, of the shipped file's bytes
    purpose: str


HELDOUT_SHA256 = {  # of each family's shipped heldout file
    "cartpole": "860e5f0eea1f42f3f153695eba347b5222f76a90df7563481edadc9708376c81",
    "acrobot": "969b08a8b279220c3eea5bf242dcc398c97e5cde632ff6df984302320a3fef55",
    "mountaincar": "ca4a204c071cfd6ec5b7a9e2d28b40b593596a3b908bd6d4d52e3e21b59862bf",
    "pendulum": "bbc1c1318a5d9df7d9caba9125377845e7d4d1a65e8e73800f6cd20506beeb85",
    "brax:inverted_pendulum": "d65a1b4b6b97d4c9adf0845b9218ee5943dbecf27c1b4b4a15aca8a2613249e9",
    "brax:inverted_double_pendulum":
        "59f54b7529132b097f046ec35b2699e8a45f61a706c147f9c44634677332ce50",
    "brax:hopper": "5ba9a068595a139671796d47b36b6f52f741b8149585edf8e4bcefad513db487",
}
VALIDATION_SHA256 = {  # of each family's shipped validation file
    "cartpole": "87f76b1574b692484a18af9ca68be60246524c55bbcd00f2fb4a158ccb9fe248",
    "acrobot": "7a62ab3928c8589bde007ae06daa9b30a22496ee3cf8fc589c6ee9e7f438ae43",
    "mountaincar": "472202dd04df28a9c2c74793c07e076818f0f8f4db4b3471a2efd86f445ec192",
    "pendulum": "80f5820d9bc36ed7b560f9be008c16698b91c63faf958bd796575ffdbde06a72",
    "brax:inverted_pendulum": "0c1154075a70e5abcccdb792c17ba7c93815f37ad9c4a12c543d451ceb210055",
    "brax:inverted_double_pendulum":
        "053a1721476f79e1e6b9404dfea9d3a7702d7e2cd688fd068864c19fe0d90e33",
    "brax:hopper": "a42d0690920510514cc30240a7dd78a335bed58becdf4d0154f16f7decebd97a",
}
SPLITS: dict[str, SetSpec] = {
    HELDOUT: SetSpec(HELDOUT, seed=20261204, n=512, purpose="reported results only",
                     file_sha256=HELDOUT_SHA256),
    VALIDATION: SetSpec(VALIDATION, seed=20261205, n=128,
                        purpose="the engineer's context and tuning",
                        file_sha256=VALIDATION_SHA256),
}


def split_spec(split: str) -> SetSpec:
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r} (known: {', '.join(SPLITS)})")
    return SPLITS[split]


def file_name(name: str, split: str) -> str:
    return f"control_{family(name).name.replace(':', '_')}_{split_spec(split).split}_v1.npz"


def data_path(name: str, split: str) -> Path:
    return Path(str(resources.files("jaxenv") / "data" / file_name(name, split)))


def build_arrays(name: str, split: str) -> dict[str, np.ndarray]:
    """The split's arrays, drawn afresh (see the module docstring)."""
    fam, spec = family(name), split_spec(split)
    rng = np.random.default_rng([spec.seed, ALL_NAMES.index(fam.name)])
    n = spec.n
    logm = np.empty((n, len(fam.params)))
    for k, p in enumerate(fam.params):
        u = (rng.permutation(n) + rng.random(n)) / n  # one draw in each of n strata
        lo, hi = np.log(p.span[0]), np.log(p.span[1])
        logm[:, k] = lo + u * (hi - lo)
    mult = np.exp(logm)
    nominal = np.array([p.nominal for p in fam.params])
    return {
        "params": np.array(fam.param_names),
        "multipliers": mult.astype(np.float32),
        "values": (mult * nominal).astype(np.float32),
        "nominal": nominal.astype(np.float32),
        "seed": np.int64(spec.seed),
    }


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """A compressed .npz with fixed zip timestamps, so the same arrays give the same bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for key in sorted(arrays):
            member = io.BytesIO()
            np.save(member, arrays[key], allow_pickle=False)
            info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, member.getvalue(), compresslevel=9)
    path.write_bytes(buf.getvalue())


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """The bytes `write_npz` writes for these arrays."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "set.npz"
        write_npz(p, arrays)
        return p.read_bytes()


def file_sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def load_arrays(name: str, split: str, path: str | Path | None = None) -> dict[str, np.ndarray]:
    """A split's raw arrays; the shipped file must match its pinned sha256."""
    p = Path(path) if path is not None else data_path(name, split)
    if not p.exists():
        raise FileNotFoundError(f"{p} is missing: run scripts/make_control_sets.py")
    spec, fam = split_spec(split), family(name)
    pinned = spec.file_sha256.get(fam.name, "")
    if path is None and pinned and file_sha256(p) != pinned:
        raise ValueError(f"{p} does not match its pinned sha256 (was it edited?); regenerate "
                         f"it with scripts/make_control_sets.py")
    with np.load(p, allow_pickle=False) as f:
        arrays = {k: f[k] for k in f.files}
    if int(arrays["seed"]) != spec.seed or tuple(arrays["params"]) != fam.param_names:
        raise ValueError(f"{p} is not the {fam.name} {split} split (seed or parameters differ)")
    return arrays


def load_set(name: str, split: str = HELDOUT, path: str | Path | None = None
             ) -> tuple[Any, dict[str, np.ndarray]]:
    """A split as a batch of levels [N] and its metadata (``params``, ``values`` [N, K],
    ``multipliers`` [N, K], ``nominal`` [K])."""
    arrays = load_arrays(name, split, path)
    return family(name).levels(arrays["values"]), arrays


def bin_edges(name: str, param: str, n_bins: int = N_BINS) -> np.ndarray:
    """Edges [n_bins + 1] of a parameter's bins, as multipliers (log-spaced over its span)."""
    p = family(name).params[family(name).param_names.index(param)]
    return np.exp(np.linspace(np.log(p.span[0]), np.log(p.span[1]), n_bins + 1))


def summarize(name: str, meta: dict[str, np.ndarray], success: Any, normalized_return: Any,
              outcome: Any = None, n_bins: int = N_BINS) -> dict[str, Any]:
    """Success %, mean normalised return, outcome shares and the per-parameter breakdown.

    success / normalized_return / outcome: one value per variant of the set, in its order.
    Each parameter's bins are `bin_edges` (multipliers) with their physical values.
    """
    fam = family(name)
    succ = np.asarray(success, bool).reshape(-1)
    nret = np.asarray(normalized_return, np.float64).reshape(-1)
    mult = np.asarray(meta["multipliers"], np.float64)
    if not (len(succ) == len(nret) == len(mult)):
        raise ValueError(f"expected one result per variant ({len(mult)}), got "
                         f"{len(succ)} successes and {len(nret)} returns")
    out: dict[str, Any] = {"family": fam.name, "n": int(len(succ)),
                           "success": float(100.0 * succ.mean()),
                           "normalized_return": float(nret.mean())}
    if outcome is not None:
        oc = np.asarray(outcome).reshape(-1)
        out["outcomes"] = {o: float(np.mean(oc == i)) for i, o in enumerate(fam.outcomes)}
    by: dict[str, list[dict[str, float]]] = {}
    for k, p in enumerate(fam.params):
        edges = bin_edges(name, p.name, n_bins)
        idx = np.clip(np.searchsorted(edges, mult[:, k], side="right") - 1, 0, n_bins - 1)
        rows = []
        for b in range(n_bins):
            m = idx == b
            rows.append({"lo": float(edges[b]), "hi": float(edges[b + 1]),
                         "value_lo": float(edges[b] * p.nominal),
                         "value_hi": float(edges[b + 1] * p.nominal), "n": int(m.sum()),
                         "success": float(100.0 * succ[m].mean()) if m.any() else float("nan"),
                         "normalized_return": float(nret[m].mean()) if m.any()
                         else float("nan")})
        by[p.name] = rows
    out["by_param"] = by
    return out
