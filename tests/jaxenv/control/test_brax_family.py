"""brax's inverted pendulums and hopper as physics families: every knob changes a trajectory on
the generalized backend, the standard config is brax's own system, our steps are brax's steps,
new variants never recompile, and a non-finite variant ends its episode and is counted.

Hopper's generalized physics (contacts, a projected-gradient solver) compiles slowly (~10-20 s
per reset or step program on the CPU), so its checks share one compiled program: a batch of
levels played from our reset by our step and brax's step side by side (`hopper_run`).
"""

from __future__ import annotations

import copy

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("brax")

from jaxenv.compiles import count_compiles  # noqa: E402
from jaxenv.control import BRAX_NAMES, make  # noqa: E402
from jaxenv.control.evaluate import play  # noqa: E402
from jaxenv.control.family import NONFINITE, RUNNING  # noqa: E402

pytestmark = pytest.mark.slow

T = 30
HOPPER = "brax:hopper"
PENDULUMS = tuple(n for n in BRAX_NAMES if n != HOPPER)
MASS_LINKS = {  # a mass knob and the indices of the links whose inertia follows it
    "brax:inverted_pendulum": ("pole_mass", [1]),
    "brax:inverted_double_pendulum": ("pole_mass", [1, 2]), HOPPER: ("torso_mass", [0])}


@pytest.fixture(scope="module", params=PENDULUMS)
def env(request):
    return make(request.param)


@pytest.fixture(scope="module", params=BRAX_NAMES)
def any_env(request):
    return make(request.param)


def random_values(cs, rng):
    return {k.name: float(rng.choice(k.grid())) for k in cs.knobs}


def push(obs, key):
    """Open loop: push right, then left, so every parameter shows in the motion."""
    return jnp.full((1,), 0.3, jnp.float32)


@pytest.fixture(scope="module")
def rollout(env):
    cfg = env.default_params

    @jax.jit
    def run(key, level):
        obs, s = env.reset_to_level(key, level, cfg)

        def body(s, t):
            a = jnp.where(t % 20 < 10, 0.3, -0.3)[None]
            obs, s, *_ = env.step_env(key, s, a, cfg)
            return s, obs
        return jax.lax.scan(body, s, jnp.arange(T))[1]
    return run


def test_every_knob_changes_a_trajectory(env, rollout):
    cs, key = env.config_space, jax.random.PRNGKey(3)
    base = np.asarray(rollout(key, env.generate(key, env.default_params)))
    assert np.all(np.isfinite(base))
    for k in cs.editable_names():
        far = cs[k].low if k.endswith("_min") else cs[k].high
        lv = env.generate(key, cs.to_config(dict(cs.default(), **{k: far})))
        traj = np.asarray(rollout(key, lv))
        assert not np.allclose(traj, base, rtol=0, atol=1e-6), f"{k} changes nothing"


def test_standard_config_is_brax_system(any_env):
    env = any_env
    ours = env.family.env_params(env.generate(jax.random.PRNGKey(0), env.default_params))
    raw = env.raw.default_params
    for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(raw), strict=True):
        np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64),
                                   rtol=1e-6)


def test_inertia_follows_mass(any_env):
    env, cs = any_env, any_env.config_space
    knob, links = MASS_LINKS[env.family.name]
    value = cs[f"{knob}_max"].high
    lv = env.generate(jax.random.PRNGKey(0), cs.to_config(dict(
        cs.default(), **{f"{knob}_min": value, f"{knob}_max": value})))
    sys, std = env.family.env_params(lv), env.raw.default_params
    i, i0 = np.asarray(sys.link.inertia.i), np.asarray(std.link.inertia.i)
    ratio = value / np.asarray(std.link.inertia.mass)[links]
    np.testing.assert_allclose(i[links], i0[links] * ratio[:, None, None], rtol=1e-5)
    others = ~np.isin(np.arange(len(i0)), links)
    np.testing.assert_allclose(i[others], i0[others], rtol=1e-6)


def test_steps_equal_brax(env):
    """Differential: brax's own env, given the variant's system, takes the same steps."""
    cs = env.config_space
    key = jax.random.PRNGKey(5)
    level = env.generate(key, cs.to_config(random_values(cs, np.random.default_rng(5))))
    sys = env.family.env_params(level)
    brax_env = copy.copy(env.raw.env)
    brax_env.sys = sys
    cfg = env.default_params
    obs, s = env.reset_to_level(key, level, cfg)
    bs = jax.jit(brax_env.reset)(key)
    np.testing.assert_allclose(obs, bs.obs, rtol=1e-5, atol=1e-6)
    ours, theirs = jax.jit(env.step_env), jax.jit(brax_env.step)
    for t in range(40):
        a = jnp.full((1,), 0.5 * np.sin(t / 3), jnp.float32)
        obs, s, r, term, _ = ours(key, s, a, cfg)
        bs = theirs(bs, a)
        np.testing.assert_allclose(obs, bs.obs, rtol=1e-5, atol=1e-6, err_msg=f"step {t}")
        assert bool(term) == bool(bs.done > 0) and float(r[0]) == float(bs.reward)
        if term:
            break


def test_no_recompile_over_20_batches(env):
    cs, b = env.config_space, 8
    cfg0 = env.default_params

    @jax.jit
    def run(key, cfgs):
        _, state = jax.vmap(env.reset)(jax.random.split(key, b), cfgs)

        def body(state, k):
            a = jax.random.uniform(k, (b, 1), minval=-1, maxval=1)
            obs, state, *_ = jax.vmap(env.step)(jax.random.split(k, b), state, a, cfgs)
            return state, obs
        return jax.lax.scan(body, state, jax.random.split(key, 10))[1]

    rng = np.random.default_rng(0)

    def cfgs():
        return cs.stack([random_values(cs, rng) for _ in range(b)])
    run(jax.random.PRNGKey(0), cfgs())
    with count_compiles() as c:
        for i in range(20):
            obs = run(jax.random.PRNGKey(i + 1), cfgs())
            assert np.all(np.isfinite(np.asarray(obs)))
    assert c.n == 0 and run._cache_size() == 1
    assert type(cfg0) is type(cs.to_config())


def test_a_nonfinite_variant_ends_and_is_counted(env):
    fam = env.family
    broken = dict(fam.nominal(), pole_mass=0.0, cart_mass=0.0)  # massless: outside the bounds
    levels = fam.levels(np.array([list(fam.nominal().values()), list(broken.values())],
                                 np.float32))
    m = play(env, push, levels, jax.random.PRNGKey(0))
    nf = fam.outcomes.index(NONFINITE)
    assert int(m["outcome"][1]) == nf and int(m["outcome"][0]) != nf
    assert bool(m["nonfinite"][1]) and not bool(m["success"][1])
    for v in m.values():
        assert np.all(np.isfinite(np.asarray(v, np.float64)))


# ----------------------------------------------------------------------------- hopper


@pytest.fixture(scope="module")
def hopper():
    return make(HOPPER)


def hopper_action(t):
    """Open loop, the three motors unequal, reversing every 10 steps."""
    return jnp.where(t % 20 < 10, 0.5, -0.5) * jnp.array([1.0, -0.7, 0.4], jnp.float32)


@pytest.fixture(scope="module")
def hopper_run(hopper):
    """levels [B] -> per step our (obs, reward, end) and brax's (obs, reward, done), brax's own
    step run on the variant's system from its own state, and our episodes' metrics and outcome
    (each episode stops at its end, as `play` does). One jit for every hopper check."""
    from brax.envs.base import State

    env, cfg = hopper, hopper.default_params
    metrics = ("reward_forward", "reward_ctrl", "reward_healthy", "x_position", "x_velocity")

    def one(key, level):
        obs, s = env.reset_to_level(key, level, cfg)
        brax_env = copy.copy(env.raw.env)
        brax_env.sys = env.family.env_params(level)
        z = jnp.float32(0.0)
        bs = State(pipeline_state=s.env.pipeline_state, obs=obs, reward=z, done=z,
                   metrics={m: z for m in metrics})

        def body(carry, t):
            s, bs, done = carry
            a = hopper_action(t)
            o2, s2, r, term, _ = env.step_env(key, s, a, cfg)
            b2 = brax_env.step(bs, a)
            ended = term | env.is_truncated(s2, cfg)
            s2 = jax.tree.map(lambda new, old: jnp.where(done, old, new), s2, s)
            return (s2, b2, done | ended), (o2, r[0], term, b2.obs, b2.reward, b2.done > 0)

        (s, _, _), steps = jax.lax.scan(body, (s, bs, jnp.bool_(False)), jnp.arange(T))
        return steps, {**env.episode_metrics(s), "outcome": env.episode_outcome(s)}

    @jax.jit
    def run(key, levels):
        n = jax.tree.leaves(levels)[0].shape[0]
        return jax.vmap(one)(jax.random.split(key, n), levels)
    return run


@pytest.fixture(scope="module")
def hopper_results(hopper, hopper_run):
    """One call: the standard level, each knob at each end of its bounds, a random variant,
    and a variant outside the bounds (infinite motor torque) that goes non-finite."""
    fam, cs = hopper.family, hopper.config_space
    rows, names = [fam.nominal()], ["standard"]
    for p in fam.params:
        for end in ("low", "high"):
            rows.append(dict(fam.nominal(), **{p.name: getattr(cs[f"{p.name}_max"], end)}))
            names.append(f"{p.name}={end}")
    rng = np.random.default_rng(5)
    rows.append({p.name: float(rng.uniform(p.low, p.high)) for p in fam.params})
    names.append("random")
    rows.append(dict(fam.nominal(), gear=float("inf")))
    names.append("broken")
    levels = fam.levels(np.array([[r[p] for p in fam.param_names] for r in rows], np.float32))
    steps, final = hopper_run(jax.random.PRNGKey(3), levels)
    return names, jax.tree.map(np.asarray, steps), jax.tree.map(np.asarray, final), rows


def test_hopper_every_knob_changes_a_trajectory(hopper_results):
    names, (obs, *_), _, _ = hopper_results
    base = obs[0]
    assert np.all(np.isfinite(base))
    for i, name in enumerate(names[1:-2], 1):
        assert np.all(np.isfinite(obs[i])), name
        assert not np.allclose(obs[i], base, rtol=0, atol=1e-6), f"{name} changes nothing"


def test_hopper_steps_equal_brax(hopper_results):
    """Differential: brax's own step on the variant's system, from its own state, takes the
    same steps as ours (every finite variant, until its episode ends)."""
    names, (obs, r, term, bobs, br, bdone), _, _ = hopper_results
    for i, name in enumerate(names[:-1]):
        n = int(np.argmax(term[i])) + 1 if term[i].any() else T
        np.testing.assert_allclose(obs[i, :n], bobs[i, :n], rtol=1e-5, atol=1e-5, err_msg=name)
        np.testing.assert_allclose(r[i, :n], br[i, :n], rtol=1e-5, atol=1e-5, err_msg=name)
        np.testing.assert_array_equal(term[i, :n], bdone[i, :n], err_msg=name)


def test_hopper_nonfinite_variant_ends_and_is_counted(hopper, hopper_results):
    names, (obs, *_), final, _ = hopper_results
    nf = hopper.family.outcomes.index(NONFINITE)
    assert int(final["outcome"][-1]) == nf and bool(final["nonfinite"][-1])
    assert not bool(final["success"][-1]) and np.all(np.isfinite(obs[-1]))
    assert not np.any(final["nonfinite"][:-1])
    assert np.all((final["outcome"][:-1] != nf) & (final["outcome"][:-1] != RUNNING) |
                  (final["length"][:-1] == T))
    for v in final.values():
        assert np.all(np.isfinite(np.asarray(v, np.float64)))


def test_hopper_no_recompile_over_batches(hopper, hopper_results, hopper_run):
    """New variants (random values over the knob bounds) reuse the one compiled program."""
    fam, rng = hopper.family, np.random.default_rng(0)
    n = len(hopper_results[0])
    with count_compiles() as c:
        for i in range(3):
            values = np.array([[rng.uniform(p.low, p.high) for p in fam.params]
                               for _ in range(n)], np.float32)
            steps, _ = hopper_run(jax.random.PRNGKey(i + 1), fam.levels(values))
            assert np.all(np.isfinite(np.asarray(steps[0])))
    assert c.n == 0 and hopper_run._cache_size() == 1
