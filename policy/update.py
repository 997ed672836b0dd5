"""The update phase: `update_epochs` epochs of PPO over minibatches of a rollout's time steps.

A minibatch is a random subset of the rollout's *time steps* over all envs: envs are
independent, so samples stay decorrelated, and every device of a sharded run holds its part
of every minibatch without moving data. Means divide local sums by psum'd global counts and
gradients are psum'd, so a sharded update equals the one-device update up to float summation
order. Non-finite steps are skipped and counted (`policy.guard`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax

from policy.guard import all_finite, poison_if
from policy.loss import LossBatch, ppo_loss
from policy.rollout import Transition

Psum = Callable[[Any], Any]


def make_optimizer(lr: float, max_grad_norm: float, adam_eps: float,
                   decay_steps: int = 0) -> optax.GradientTransformation:
    """Adam behind global-norm clipping; non-finite steps are skipped (never applied).

    `decay_steps` > 0: the learning rate falls linearly from `lr` to 0 over that many gradient
    steps (PureJaxRL's `anneal_lr`), then stays at 0; Adam's step count lives in the optimizer
    state, so the schedule runs on across stages and checkpoints. 0: a constant `lr`.
    """
    if decay_steps < 0:
        raise ValueError(f"decay_steps must be >= 0 (0: a constant learning rate), got "
                         f"{decay_steps}")
    rate = optax.linear_schedule(lr, 0.0, decay_steps) if decay_steps > 0 else lr
    inner = optax.chain(optax.clip_by_global_norm(max_grad_norm), optax.adam(rate, eps=adam_eps))
    return optax.apply_if_finite(inner, max_consecutive_errors=2**30)


def ppo_epochs(network: Any, tx: optax.GradientTransformation, hp: Any, params: Any,
               opt_state: Any, traj: Transition, adv: jax.Array, target: jax.Array,
               key: jax.Array, psum: Psum = lambda x: x) -> tuple[Any, Any, dict]:
    """Returns (params, opt_state, metrics averaged over the minibatch steps + `nonfinite`).

    `hp` provides update_epochs, num_minibatches, clip_eps, vf_coef, ent_coef, clip_value.
    """
    t_len = traj.done.shape[0]
    data = (traj, adv, target)

    def minibatch(carry, idx):
        params, opt_state = carry
        tr, a, tgt = jax.tree.map(lambda x: x[idx], data)
        lb = LossBatch(action=tr.action, old_logp=tr.logp, old_value=tr.value, adv=a,
                       target=tgt, pi_mask=tr.inp.acting, v_mask=tr.inp.agent_mask)
        n_pi = psum(lb.pi_mask.sum().astype(jnp.float32))
        n_v = psum(lb.v_mask.sum().astype(jnp.float32))

        def loss_fn(p):
            logits, value = network.apply(p, tr.inp)
            return ppo_loss(logits, value, lb, dist=network.dist, n_pi=n_pi, n_v=n_v,
                            clip_eps=hp.clip_eps,
                            vf_coef=hp.vf_coef, ent_coef=hp.ent_coef, clip_value=hp.clip_value)

        (loss, aux), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        loss, aux, grads = psum(loss), psum(aux), psum(grads)
        finite = jnp.isfinite(loss) & all_finite(grads)
        grads = poison_if(~finite, grads)
        updates, opt_state = tx.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        m = {"loss": loss, **aux, "grad_norm": optax.tree.norm(grads),
             "nonfinite": (~finite).astype(jnp.int32)}
        return (params, opt_state), m

    def epoch(carry, k):
        perm = jax.random.permutation(k, t_len).reshape(hp.num_minibatches, -1)
        return jax.lax.scan(minibatch, carry, perm)

    (params, opt_state), mets = jax.lax.scan(
        epoch, (params, opt_state), jax.random.split(key, hp.update_epochs))
    nonfinite = mets.pop("nonfinite").sum()
    return params, opt_state, {**jax.tree.map(jnp.mean, mets), "nonfinite": nonfinite}


__all__ = ["make_optimizer", "ppo_epochs"]
