"""`envengineer demo`: the environment layer end to end on its embedded default config.

Generates levels, shows one, and rolls random joint actions through the jitted env: no GPU,
no API key, no downloads.
"""

from __future__ import annotations

import json
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxenv.levels import make_pool
from jaxenv.mapf import CAUSES, Capacity, MAPFFrozenLake, render_text
from jaxenv.wrappers import PoolReset


def demo(levels: int, envs: int, steps: int, seed: int) -> dict:
    """Generate levels, show one, roll random joint actions through the jitted env, report."""
    cap = Capacity()
    env = PoolReset(MAPFFrozenLake(cap))
    space = env.config_space
    print("MAPF-FrozenLake config space (what the engineer may edit):")
    print(space.describe(editable_only=False))
    key = jax.random.key(seed)
    t0 = time.perf_counter()
    params = make_pool(env, key, space.to_config(), levels)
    jax.block_until_ready(params)
    gen_s = time.perf_counter() - t0
    pool = jax.device_get(params.pool)
    print(f"\nGenerated {levels} levels in {gen_s:.1f}s (compile included); "
          f"needs-wait share {pool.needs_wait.mean():.3f} "
          f"(config asks {np.mean(space.default()['wait_ratio']):.2f}).")
    first = jax.tree.map(lambda x: x[0], params.pool)
    print(f"\nA sample level (optimal sum of costs {int(first.opt_soc)}, "
          f"makespan {int(first.opt_makespan)}, needs a wait: {bool(first.needs_wait)}):")
    print(render_text(first))

    def rollout(key):
        obs, state = jax.vmap(env.reset, (0, None))(jax.random.split(key, envs), params)

        def body(state, k):
            ka, ks = jax.random.split(k)
            act = jax.random.randint(ka, (envs, cap.max_agents), 0, env.num_actions)
            _, state, _, term, trunc, info = jax.vmap(env.step, (0, 0, 0, None))(
                jax.random.split(ks, envs), state, act, params)
            cause = jnp.where(trunc, CAUSES.index("timeout"), info["cause"])
            return state, (term | trunc, info["success"], cause)

        return jax.lax.scan(body, state, jax.random.split(key, steps))[1]

    run = jax.jit(rollout)
    jax.block_until_ready(run(key))
    t0 = time.perf_counter()
    done, success, cause = jax.device_get(run(jax.random.fold_in(key, 1)))
    dt = time.perf_counter() - t0
    episodes = int(done.sum())
    causes = {c: int((cause[done] == i).sum()) for i, c in enumerate(CAUSES) if i}
    summary = {
        "env_steps_per_s": envs * steps / dt,
        "episodes": episodes,
        "random_policy_success": float(success.sum() / max(episodes, 1)),
        "failure_causes": causes,
    }
    print(f"\nRandom joint actions, {envs} envs x {steps} steps in {dt:.2f}s: "
          f"{summary['env_steps_per_s']:.3g} env-steps/s, {episodes} episodes, "
          f"success {summary['random_policy_success']:.3f}")
    print("Failure causes of random play: " + json.dumps(causes))
    return summary
