"""brax's inverted pendulums as physics families: every knob changes a trajectory on the
generalized backend, the standard config is brax's own system, our steps are brax's steps,
new variants never recompile, and a non-finite variant ends its episode and is counted."""

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
from jaxenv.control.family import NONFINITE  # noqa: E402

T = 30


@pytest.fixture(scope="module", params=BRAX_NAMES)
def env(request):
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


def test_standard_config_is_brax_system(env):
    ours = env.family.env_params(env.generate(jax.random.PRNGKey(0), env.default_params))
    raw = env.raw.default_params
    for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(raw), strict=True):
        np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64),
                                   rtol=1e-6)


def test_inertia_follows_mass(env):
    cs = env.config_space
    lv = env.generate(jax.random.PRNGKey(0), cs.to_config(dict(
        cs.default(), pole_mass_min=10.0, pole_mass_max=10.0)))
    sys, std = env.family.env_params(lv), env.raw.default_params
    ratio = 10.0 / float(std.link.inertia.mass[1])
    np.testing.assert_allclose(sys.link.inertia.i[1], std.link.inertia.i[1] * ratio, rtol=1e-5)
    np.testing.assert_allclose(sys.link.inertia.i[0], std.link.inertia.i[0], rtol=1e-6)


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
