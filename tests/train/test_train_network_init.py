"""Network initialisation under ``vmap`` (a sweep's members, the probe
training): the same parameters as one member at a time, and no deadlock of
XLA's CPU thread pool (jaxlib 0.10.2's batched LAPACK QR, used by the
orthogonal initialiser, waits on the pool it runs in; see
``plume_jax.train.algorithms.networks.init_params``)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest

from plume_jax.train.algorithms import networks
from plume_jax.train.config import NetworkConfig

# One network type is enough: the rule wraps whichever flax module init_params gets.
NETWORKS = {"gru": NetworkConfig(type="gru", hidden_sizes=(16, 16), gru_size=8),
            "mlp": NetworkConfig(type="mlp", hidden_sizes=(16, 16))}


@pytest.mark.slow
def test_vmapped_init_equals_one_member_at_a_time():
    net = networks.ActorCritic(config=NETWORKS["gru"], action_dim=3, discrete=True)
    keys = jax.random.split(jax.random.key(3), 4)
    batched = jax.jit(jax.vmap(lambda k: networks.init_params(net, k, 5)))(keys)
    nested = jax.jit(jax.vmap(jax.vmap(lambda k: networks.init_params(net, k, 5))))(
        keys.reshape(2, 2))
    for i, key in enumerate(keys):
        one = networks.init_params(net, key, 5)
        for member, alone, deep in zip(jax.tree.leaves(jax.tree.map(lambda x: x[i], batched)),
                                       jax.tree.leaves(one),
                                       jax.tree.leaves(jax.tree.map(
                                           lambda x: x[i // 2, i % 2], nested))):
            np.testing.assert_array_equal(member, alone)
            np.testing.assert_array_equal(deep, alone)


def test_vmap_over_other_inputs_shares_one_initialisation():
    net = networks.ActorCritic(config=NETWORKS["mlp"], action_dim=2, discrete=True)
    key = jax.random.key(0)
    shared = jax.vmap(lambda _: networks.init_params(net, key, 5))(np.arange(3))
    alone = networks.init_params(net, key, 5)
    for copies, one in zip(jax.tree.leaves(shared), jax.tree.leaves(alone)):
        assert copies.shape == (3,) + one.shape
        np.testing.assert_array_equal(copies, np.broadcast_to(one, copies.shape))


_MANY_VMAPPED_INITS = textwrap.dedent("""
    import os
    cpus = sorted(os.sched_getaffinity(0))[:2]
    os.sched_setaffinity(0, cpus)  # XLA sizes its CPU pool from this: 2 threads
    import jax
    import jax.numpy as jnp
    import plume_jax
    from plume_jax.train.config import NetworkConfig
    from plume_jax.train.algorithms.ppo import PPO, Hparams, PPOStatic

    members = 6
    env, params = plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[16, 16], max_steps=20)
    static = PPOStatic(num_envs=4, num_steps=4, update_epochs=1, num_minibatches=1,
                       num_updates=1, network=NetworkConfig(type="mlp", hidden_sizes=(32, 32)))
    algo = PPO(env, params, static)
    hp = Hparams(**{name: jnp.full(members, value, jnp.float32) for name, value in dict(
        learning_rate=3e-4, ent_coef=0.0, vf_coef=0.5, gamma=0.99, gae_lambda=0.95,
        clip_eps=0.2, max_grad_norm=0.5, weight_decay=0.0).items()})
    batch_params = jax.tree.map(lambda x: jnp.stack([x] * members), params)
    init = jax.jit(jax.vmap(algo.init))  # what plume-jax sweep does
    for i in range(300):
        keys = jax.random.split(jax.random.key(i), members)
        jax.block_until_ready(init(keys, hp, batch_params))
    print("done")
""")


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs sched_setaffinity")
def test_vmapped_network_init_does_not_deadlock_the_cpu_thread_pool():
    """Before the fix, 6 members' orthogonal initialisation (6 batched QR
    calls in one program) hung within the first few hundred calls on a
    2-thread pool: ``plume-jax sweep`` and the probe training never
    returned. A deadlock shows here as the subprocess's timeout."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    try:
        run = subprocess.run([sys.executable, "-c", _MANY_VMAPPED_INITS], env=env,
                             capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("vmapped network initialisation deadlocked (no result in 120 s)")
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "done"
