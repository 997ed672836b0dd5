"""The classic-control physics families (`jaxenv.control`): every knob matters, levels are
consistent, batches of new variants never recompile, a non-finite variant ends its episode and
is counted, and our steps are raw gymnax's steps under the same params."""

from __future__ import annotations

import functools
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxenv.batching import broadcast, take
from jaxenv.compiles import count_compiles
from jaxenv.control import NAMES, make
from jaxenv.control.evaluate import play
from jaxenv.control.family import NONFINITE, RUNNING
from jaxenv.levels import PoolParams, take_rows
from jaxenv.wrappers import AutoReset, PoolReset, multi_agent

T = 25  # steps compared in trajectory tests


def fixed_action(env, t: int) -> jax.Array:
    """A fixed open-loop action sequence that exercises every knob (Pendulum: a torque above
    every torque limit, so the limit always binds)."""
    if env.continuous:
        return jnp.full((1,), 4.0 if t % 10 < 5 else -4.0, jnp.float32)
    return jnp.full((1,), (t // 3) % env.num_actions, jnp.int32)


def trajectory(env, level, key) -> np.ndarray:
    cfg = env.default_params
    obs, s = env.reset_to_level(key, level, cfg)
    out = [obs]
    for t in range(T):
        obs, s, *_ = env.step_env(key, s, fixed_action(env, t), cfg)
        out.append(obs)
    return np.stack(out)


def random_values(cs, rng: np.random.Generator) -> dict:
    """Any config of the space: each knob uniform on its edit grid (min and max independent)."""
    return {k.name: float(rng.choice(k.grid())) for k in cs.knobs}


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_every_knob_changes_a_trajectory(name):
    env = make(name)
    cs = env.config_space
    key = jax.random.PRNGKey(3)
    gen = jax.jit(env.generate)
    base = trajectory(env, gen(key, env.default_params), key)
    assert np.all(np.isfinite(base))
    for k in cs.editable_names():
        knob = cs[k]
        far = knob.low if k.endswith("_min") else knob.high  # widen the range to a bound
        traj = trajectory(env, gen(key, cs.to_config(dict(cs.default(), **{k: far}))), key)
        assert not np.allclose(traj, base, rtol=0, atol=1e-6), f"{name}: {k} changes nothing"


@pytest.mark.parametrize("name", NAMES)
def test_rules_are_the_standard_tasks(name):
    """The standard config's level is gymnax's default params (rules and physics)."""
    env = make(name)
    ours = env.family.env_params(env.generate(jax.random.PRNGKey(0), env.default_params))
    raw = env.raw.default_params
    for f in raw.__dataclass_fields__:
        np.testing.assert_allclose(np.asarray(getattr(ours, f), np.float64),
                                   np.asarray(getattr(raw, f), np.float64), rtol=1e-6,
                                   err_msg=f"{name}.{f}")
        assert np.asarray(getattr(ours, f)).dtype in (np.float32, np.int32), f


@pytest.mark.parametrize("name", NAMES)
def test_steps_equal_raw_gymnax(name):
    """Differential: reset and 60 steps of random actions under a random variant equal raw
    gymnax's reset_env / step_env under that variant's params, to one float32 rounding (raw's
    params built inside its jit as ours are, since XLA folds the rules into constants; the two
    jits may fuse the same arithmetic differently), and to 1e-5 over the first 10 steps with
    the params passed as arrays, as a batch of gymnax params is."""
    env = make(name)
    rng = np.random.default_rng(NAMES.index(name))
    key = jax.random.PRNGKey(11)
    level = env.generate(key, env.config_space.to_config(random_values(env.config_space, rng)))
    params = env.family.env_params(level)
    cfg = env.default_params
    ours_step = jax.jit(env.step_env)
    raw_step = jax.jit(lambda k, s, a, lv: env.raw.step_env(k, s, a, env.family.env_params(lv)))
    raw_arrays = jax.jit(env.raw.step_env)
    obs, s = env.reset_to_level(key, level, cfg)
    robs, rs = env.raw.reset_env(key, params)
    aobs, ars = robs, rs
    np.testing.assert_array_equal(obs, robs)
    for t in range(60):
        k = jax.random.fold_in(key, t)
        a = (jnp.asarray(rng.uniform(-3, 3, (1,)), jnp.float32) if env.continuous
             else jnp.asarray(rng.integers(0, env.num_actions, (1,)), jnp.int32))
        raw_a = a if env.continuous else a[0]
        obs, s, rew, term, info = ours_step(k, s, a, cfg)
        robs, rs, rrew, rterm, _ = raw_step(k, rs, raw_a, level)
        np.testing.assert_allclose(obs, robs, rtol=2e-7, atol=1e-6, err_msg=f"{name} step {t}")
        # the reward squares the state, so a rounding of the state reaches it scaled by twice
        # the largest state value (the pendulum's top speed)
        np.testing.assert_allclose(rew[0], rrew, rtol=2e-7, atol=1.6e-5)
        assert bool(term) == bool(rterm) and not bool(info["nonfinite"])
        if t < 10:
            aobs, ars, *_ = raw_arrays(k, ars, raw_a, params)
            np.testing.assert_allclose(obs, aobs, rtol=1e-5, atol=1e-6)
        if term:
            break


@functools.cache
def _env_and_generate(name: str):
    """One env and one jitted `generate` per family: every example has the same shapes, so
    it compiles once, not once per example."""
    env = make(name)
    return env, jax.jit(env.generate)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(NAMES), st.integers(0, 2**31 - 1))
def test_levels_lie_in_the_range_and_derived_fields_follow(name, seed):
    """Any config (min above max allowed): every drawn value lies between the two ends, every
    field is a float32/int32 array, and derived fields (CartPole's total mass and pole
    mass-length, Acrobot's centres of mass) are consistent with the drawn values."""
    env, generate = _env_and_generate(name)
    cs = env.config_space
    vals = random_values(cs, np.random.default_rng(seed))
    level = generate(jax.random.PRNGKey(seed), cs.to_config(vals))
    lv = env.family.env_params(level)
    assert all(np.asarray(x).dtype in (np.float32, np.int32) for x in jax.tree.leaves(lv))
    for p in env.family.params:
        lo, hi = sorted((vals[f"{p.name}_min"], vals[f"{p.name}_max"]))
        v = float(getattr(lv, p.name))
        assert lo - 1e-6 * abs(lo) - 1e-9 <= v <= hi + 1e-6 * abs(hi) + 1e-9, (p.name, lo, v, hi)
    if name == "cartpole":
        assert math.isclose(lv.total_mass, lv.masscart + lv.masspole, rel_tol=1e-6)
        assert math.isclose(lv.polemass_length, lv.masspole * lv.length, rel_tol=1e-6)
    if name == "acrobot":
        assert math.isclose(lv.link_com_pos_1, 0.5 * lv.link_length_1, rel_tol=1e-6)
        assert math.isclose(lv.link_com_pos_2, 0.5 * lv.link_length_2, rel_tol=1e-6)


@settings(max_examples=30, deadline=None)
@given(st.floats(0.25, 3.0), st.floats(0.02, 1.0), st.floats(0.1, 2.0))
def test_cartpole_derived_fields_follow_edits(masscart, masspole, length):
    """An edit of a mass or a length moves the derived fields with it (pinned ranges)."""
    env, generate = _env_and_generate("cartpole")
    cs = env.config_space
    edit = {f"{k}_{e}": v for k, v in (("masscart", masscart), ("masspole", masspole),
                                       ("length", length)) for e in ("min", "max")}
    cfg = cs.to_config(dict(cs.default(), **edit))
    lv = env.family.env_params(generate(jax.random.PRNGKey(0), cfg))
    assert math.isclose(lv.total_mass, np.float32(masscart) + np.float32(masspole), rel_tol=1e-6)
    assert math.isclose(lv.polemass_length, np.float32(masspole) * np.float32(length),
                        rel_tol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_no_recompile_over_20_batches_of_new_variants(name):
    """One jitted rollout (fresh variants from per-env configs, auto-reset, 20 steps) serves
    20 batches of random configs with 0 compilations after the first."""
    env = make(name)
    cs = env.config_space
    b = 16

    @jax.jit
    def rollout(key, cfgs):
        keys = jax.random.split(key, b)
        obs, state = jax.vmap(env.reset)(keys, cfgs)

        def step(carry, k):
            state, ret = carry
            ks = jax.random.split(k, b)
            act = jax.vmap(lambda kk: jax.random.uniform(kk, (1,), minval=-2, maxval=2)
                           if env.continuous
                           else jax.random.randint(kk, (1,), 0, env.num_actions))(ks)
            obs, state, r, term, trunc, _ = jax.vmap(env.step)(ks, state, act, cfgs)
            return (state, ret + r[:, 0]), obs

        (_, ret), obs = jax.lax.scan(step, (state, jnp.zeros(b)), jax.random.split(key, 20))
        return ret, obs

    rng = np.random.default_rng(0)
    rollout(jax.random.PRNGKey(0), cs.stack([random_values(cs, rng) for _ in range(b)]))
    with count_compiles() as c:
        for i in range(20):
            cfgs = cs.stack([random_values(cs, rng) for _ in range(b)])
            ret, obs = rollout(jax.random.PRNGKey(i + 1), cfgs)
            assert np.all(np.isfinite(np.asarray(obs)))
    assert c.n == 0, f"{name}: {c.n} compilations over 20 batches"
    assert rollout._cache_size() == 1


def test_compile_counter_sees_a_recompile():
    """The counter the recompile test relies on does count a new shape."""
    f = jax.jit(lambda x: x * 2)
    f(jnp.zeros(3))
    with count_compiles() as c:
        f(jnp.ones(3))
    assert c.n == 0
    with count_compiles() as c:
        f(jnp.ones(4))
    assert c.n >= 1


BROKEN = {  # physics no config may ask for (outside the knob bounds): the state goes NaN
    "cartpole": {"length": 0.0},
    "acrobot": {"link_mass_1": 0.0, "link_mass_2": 0.0, "link_moi": 0.0},
    "mountaincar": {"gravity": float("nan")},
    "pendulum": {"m": 0.0},
}


def zero_policy(env):
    def act(obs, key):
        return jnp.zeros((1,), jnp.float32 if env.continuous else jnp.int32)
    return act


@pytest.mark.parametrize("name", NAMES)
def test_a_nonfinite_variant_ends_its_episode_and_is_counted(name):
    env = make(name)
    fam = env.family
    levels = jax.tree.map(lambda a, b: jnp.stack([a, b]), fam.level(), fam.level(BROKEN[name]))
    m = play(env, zero_policy(env), levels, jax.random.PRNGKey(0))
    nf = fam.outcomes.index(NONFINITE)
    assert int(m["outcome"][1]) == nf and int(m["outcome"][0]) != nf
    assert bool(m["nonfinite"][1]) and not bool(m["success"][1]) and not bool(m["nonfinite"][0])
    for v in m.values():
        assert np.all(np.isfinite(np.asarray(v, np.float64)))
    assert int(m["length"][1]) < fam.horizon  # it ended early
    # In training (auto-reset onto broken variants), nothing non-finite comes out and every
    # episode is counted as non-finite.
    wrapped = AutoReset(env, lambda key, cfg: fam.level(BROKEN[name]))
    cfg = env.default_params
    obs, s = wrapped.reset(jax.random.PRNGKey(1), cfg)
    step = jax.jit(wrapped.step)
    ends = 0
    for t in range(30):
        obs, s, r, term, trunc, info = step(jax.random.PRNGKey(t), s, zero_policy(env)(obs, None),
                                            cfg)
        assert np.all(np.isfinite(obs)) and np.all(np.isfinite(r))
        assert np.all(np.isfinite(np.asarray(info["final_observation"])))
        assert all(np.all(np.isfinite(np.asarray(x, np.float64))) for x in jax.tree.leaves(s.env))
        if term | trunc:
            assert int(env.outcome(info, term, trunc)) == nf
            ends += 1
    assert ends >= 1


@pytest.mark.parametrize("name", NAMES)
def test_trainee_contract(name):
    """The env is its own multi-agent view and draws levels from a pool like MAPF's."""
    env = make(name)
    assert multi_agent(env) is env
    assert env.outcomes[0] in ("time_limit", "goal") and env.outcomes[-1] == NONFINITE
    cfg = env.default_params
    pool = jax.vmap(env.generate, in_axes=(0, None))(jax.random.split(jax.random.PRNGKey(0), 8),
                                                    cfg)
    pp = PoolParams(cfg=cfg, pool=pool, lo=jnp.int32(0), count=jnp.int32(8))
    obs, s = PoolReset(env).reset(jax.random.PRNGKey(1), pp)
    inp = env.agent_obs(obs, s)
    assert inp.vec.shape == (1, obs.shape[-1]) and s.cause == RUNNING
    assert env.trace(s).shape == obs.shape
    assert set(env.episode_metrics(s)) >= {"return", "normalized_return", "success", "length"}
    assert broadcast(cfg, 2).__class__ is type(cfg)


def test_pool_restart_draws_level_and_start_independently_from_one_key():
    """`PoolReset` reads the level index from the reset key's raw bits and the reset hashes
    the same key: over many restarts the index is uniform and independent of the start state
    (a correlation would bias which starts each level gets)."""
    env = make("cartpole")
    cfg = env.default_params
    pool = env.family.levels(np.array([[9.8, 1.0, 0.1, 0.5, 10.0],
                                       [9.8, 1.0, 0.1, 1.5, 10.0]]))
    pp = PoolParams(cfg=cfg, pool=pool, lo=jnp.int32(0), count=jnp.int32(2))
    wrapped = PoolReset(env)
    keys = jax.random.split(jax.random.PRNGKey(3), 8192)
    _, s0 = jax.vmap(wrapped.reset, in_axes=(0, None))(keys, pp)
    # step every env at its time limit, so the auto-reset branch is the one kept
    s0 = s0.replace(env=s0.env.replace(time=jnp.full_like(s0.env.time, env.horizon)))
    step = jax.vmap(wrapped.step, in_axes=(0, 0, None, None))
    _, s1, *_ = step(jax.random.split(jax.random.PRNGKey(4), 8192), s0, jnp.zeros(1, jnp.int32),
                     pp)
    assert np.all(np.asarray(s1.env.time) == 0)  # every env restarted
    for s in (s0, s1):
        second = np.asarray(s.level.length) > 1.0
        right = np.asarray(s.env.x) > 0
        assert abs(second.mean() - 0.5) < 0.03
        assert abs(np.corrcoef(second, right)[0, 1]) < 0.05


@pytest.mark.parametrize("name", ["pendulum", "cartpole"])
def test_pool_gather_by_leaf_or_row_gives_the_same_levels(name):
    """A family's `gather_rows` choice changes speed, never the level read."""
    env = make(name)
    pool = jax.vmap(env.generate, in_axes=(0, None))(
        jax.random.split(jax.random.PRNGKey(0), 16), env.default_params.replace(
            **{f"{p.name}_max": jnp.float32(p.high) for p in env.family.params}))
    idx = jnp.array([3, 0, 15, 7], jnp.int32)
    got, want = jax.vmap(lambda i: take_rows(pool, i))(idx), take(pool, idx)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    assert type(pool).gather_rows is (name == "cartpole")


def test_unknown_family_is_a_clear_error():
    with pytest.raises(ValueError, match="known: cartpole"):
        make("cartpol")
    with pytest.raises(ValueError, match="unknown parameters"):
        make("cartpole").family.level({"lenght": 1.0})


@pytest.mark.parametrize("name", NAMES)
def test_knobs_are_described_and_bounded(name):
    env = make(name)
    schema = env.config_space.json_schema()
    assert set(schema["properties"]) == set(env.config_space.editable_names())
    for p in env.family.params:
        for end in ("min", "max"):
            k = env.config_space[f"{p.name}_{end}"]
            assert p.unit in k.description and k.low == p.low and k.high == p.high
            assert k.default == p.nominal


@pytest.mark.slow
def test_trainer_trains_a_family_and_evaluates_held_out_levels():
    """The trainee contract, unchanged: `make_train` runs stages on a batch of physics
    distributions (levels from a stage pool), with one compile for new distributions, and its
    evaluator plays frozen variants through `reset_to_level`; `summarize` reads the result."""
    from jaxenv.control.sets import VALIDATION, load_set, summarize
    from policy import ActorCritic, Hparams, check_finite, evaluate, make_train

    env = make("cartpole")
    cs, net = env.config_space, ActorCritic(num_actions=2)
    tr = make_train(env, net, Hparams(num_envs=16, num_steps=32, num_updates=2,
                                      update_epochs=1, num_minibatches=2, pool_size=64))
    d = cs.default()
    runner = tr.init(jax.random.PRNGKey(0))
    for i, v in enumerate((dict(d, length_max=1.0), dict(d, gravity_min=5.0, force_mag_max=20.0))):
        runner, m = tr.train_stage(runner, cs.stack([d, v]), jax.random.PRNGKey(i))
        check_finite(m)
    assert tr.train_stage._cache_size() == 1
    levels, meta = load_set("cartpole", VALIDATION)
    res = evaluate(runner.params, levels, jax.random.PRNGKey(1), env=env, network=net)
    s = summarize("cartpole", meta, res.metrics["success"], res.metrics["normalized_return"],
                  res.outcome)
    assert s["n"] == len(meta["values"]) and 0 <= s["success"] <= 100
    assert abs(sum(s["outcomes"].values()) - 1) < 1e-6 and s["outcomes"]["nonfinite"] == 0


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(NAMES), st.data())
def test_schema_valid_edits_parse_and_draw_finite_variants(name, data):
    """Any edit the grammar admits (a subset of knobs, each a value of its enum) parses, and
    the variants it draws step without going non-finite (the bounds are safe physics)."""
    env = make(name)
    cs = env.config_space
    props = cs.json_schema()["properties"]
    keys = data.draw(st.lists(st.sampled_from(sorted(props)), unique=True, max_size=len(props)))
    edit = {k: data.draw(st.sampled_from(props[k]["enum"])) for k in keys}
    values = cs.parse(json.dumps(edit))
    assert all(values[k] == edit[k] for k in keys)
    key = jax.random.PRNGKey(data.draw(st.integers(0, 2**31 - 1)))
    traj = _schema_rollout(env)(key, cs.to_config(values))
    assert np.all(np.isfinite(np.asarray(traj)))


_ROLLOUTS: dict = {}


def _schema_rollout(env):
    """One jitted 50-step rollout per env (random actions), from a drawn variant."""
    if env not in _ROLLOUTS:
        @jax.jit
        def run(key, cfg):
            obs, s = env.reset_to_level(key, env.generate(key, cfg), cfg)

            def body(s, k):
                a = (jax.random.uniform(k, (1,), minval=-4, maxval=4) if env.continuous
                     else jax.random.randint(k, (1,), 0, env.num_actions))
                obs, s, r, term, info = env.step_env(k, s, a, cfg)
                flag = jnp.where(info["nonfinite"], jnp.nan, 0.0)[None]
                return s, jnp.concatenate([obs, r, flag])
            return jax.lax.scan(body, s, jax.random.split(key, 50))[1]
        _ROLLOUTS[env] = run
    return _ROLLOUTS[env]
