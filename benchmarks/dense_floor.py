"""How fast this machine runs the trainee's first layer: the floor under a PPO stage's rate.

Every agent sample of a PPO stage passes the first torso layer (`policy.network.SplitDense`:
the agent's view, V x V x 4 binary cells, times a [V*V*4, hidden] kernel) three times: forward
in the rollout, forward and the kernel's gradient in the update. This times those two products
at a stage's shapes inside one jitted `lax.scan` (as the stage runs them, so buffers are
reused), converts to GFLOP/s, and prints the fastest stage rate that this layer alone allows:

    python benchmarks/dense_floor.py --samples 65536 --inputs 484 --hidden 32

At the headline case (64 agents, V = 11) a stage of B envs x T steps is B * T * 64 samples.
`--env-rate` (env-only env-steps/s from `train_throughput.py`) turns the floor into the
largest training/env-only ratio a stage can reach if everything but the env step and this
layer were free: 1 / (1 + env rate / layer rate).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import jax
import jax.numpy as jnp
from harness import command, positive_int, time_rounds, write_json


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--samples", type=positive_int, default=65536,
                   help="rows per product (B x agents)")
    p.add_argument("--inputs", type=positive_int, default=484, help="view cells x channels")
    p.add_argument("--hidden", type=positive_int, default=32)
    p.add_argument("--agents", type=positive_int, default=64, help="samples per env step")
    p.add_argument("--iters", type=positive_int, default=8, help="products per timed call")
    p.add_argument("--repeats", type=positive_int, default=5)
    p.add_argument("--env-rate", type=float, default=0.0,
                   help="env-only env-steps/s, to print the largest ratio this layer allows")
    p.add_argument("--json", type=Path, default=None)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    a = parse(argv)
    n, d, h = a.samples, a.inputs, a.hidden
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(0), 3)
    view = jax.random.bernoulli(k1, 0.12, (n, d)).astype(jnp.uint8)  # binary, as the views
    kernel = jax.random.normal(k2, (d, h)) * 0.05
    dh = jax.random.normal(k3, (n, h))

    def looped(product):  # `iters` products on changing inputs, so none is hoisted
        @jax.jit
        def run(view, kernel, dh):
            def body(acc, i):
                x = (view ^ (i % 2).astype(jnp.uint8)).astype(jnp.float32)
                return acc + jnp.sum(product(x, kernel + acc * 1e-9, dh)), None
            return jax.lax.scan(body, 0.0, jnp.arange(a.iters))[0]
        return run

    products = {"forward": looped(lambda x, w, g: jax.nn.relu(x @ w)),
                "kernel_grad": looped(lambda x, w, g: x.T @ g)}
    flop = 2.0 * n * d * h * a.iters
    out: dict = {"samples": n, "inputs": d, "hidden": h, "device": str(jax.devices()[0])}
    rounds = time_rounds({name: (lambda r, fn=fn: fn(view, kernel, dh))
                          for name, fn in products.items()}, a.repeats)
    for name, t in rounds.items():
        out[f"{name}_gflop_per_s"] = flop / t.best_s / 1e9
    # Per agent sample: two forward products and one kernel gradient.
    s_per_sample = 2 * d * h * (2 / out["forward_gflop_per_s"]
                                + 1 / out["kernel_grad_gflop_per_s"]) / 1e9
    out["max_env_steps_per_s"] = 1.0 / (s_per_sample * a.agents)
    print(f"{n:,} x {d} -> {h}: forward {out['forward_gflop_per_s']:.1f} GFLOP/s, kernel "
          f"gradient {out['kernel_grad_gflop_per_s']:.1f} GFLOP/s")
    print(f"first layer alone caps a stage at {out['max_env_steps_per_s']:,.0f} env-steps/s "
          f"({a.agents} agent samples per env step)")
    if a.env_rate > 0:  # a stage steps the envs too: per env step, env time + layer time
        out["max_ratio"] = 1.0 / (1.0 + a.env_rate / out["max_env_steps_per_s"])
        print(f"largest training / env-only ratio it allows, everything else free: "
              f"{out['max_ratio']:.3f} (env only {a.env_rate:,.0f} env-steps/s)")
    write_json(a.json, out, command=command(__file__, argv), seeds=[0])
    return out


if __name__ == "__main__":
    main()
