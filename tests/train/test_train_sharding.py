"""Multi-device training on 4 CPU devices (a subprocess with
``XLA_FLAGS=--xla_force_host_platform_device_count=4``): the sharded env
batch of a single run and the sharded members of a sweep give the same
result as on one device, to float tolerance."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

COMMON = textwrap.dedent("""
    import json
    import jax, numpy as np
    from plume_jax.train.config import train_config
    from plume_jax.train.run import train
    from plume_jax.train.sweep import run_sweep, sweep_config

    assert jax.device_count() == 4, jax.devices()
    env = {"grid_size": [16, 16], "sigma": 4.0, "goal_radius": 1.5, "max_steps": 20}
    base = {"env": {"id": "PlumeNav-Gaussian-v0", "overrides": env},
            "algo": {"total_steps": 16 * 16 * 3, "num_envs": 16, "num_steps": 16,
                     "update_epochs": 2, "num_minibatches": 2, "learning_rate": 3e-3,
                     "normalize_obs": True},
            "network": {"hidden_sizes": [16, 16]}, "eval": {"num_envs": 8}}

    def diff(a, b):
        return max(float(np.max(np.abs(np.asarray(x) - np.asarray(y))))
                   for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))
""")

SINGLE_SCRIPT = COMMON + textwrap.dedent("""
    out = {}
    r4 = train(train_config({**base, "run": {"devices": 4, "log_every": 1}}), None,
               progress=True, evaluate=False)  # progress callbacks see sharded values
    r1 = train(train_config({**base, "run": {"devices": 1}}), None, progress=False,
               evaluate=False)
    out["single_devices"] = [r4.summary["devices"], r1.summary["devices"]]
    out["obs_sharding_devices"] = len(r4.runner.obs.sharding.device_set)
    out["obs_shard_shape"] = list(r4.runner.obs.addressable_shards[0].data.shape)
    out["single_param_diff"] = diff(r4.runner.params, r1.runner.params)
    out["single_param_scale"] = max(float(np.max(np.abs(np.asarray(x))))
                                    for x in jax.tree.leaves(r1.runner.params))
    out["single_loss"] = [[r["loss"] for r in r4.rows], [r["loss"] for r in r1.rows]]
    print("RESULT" + json.dumps(out))
""")

SWEEP_SCRIPT = COMMON + textwrap.dedent("""
    out = {}
    grid = {"run.seed": [0, 1, 2, 3]}
    s4 = run_sweep(sweep_config({"base": {**base, "run": {"devices": 4}}, "grid": grid}), None,
                   progress=False, evaluate_members=False)
    s1 = run_sweep(sweep_config({"base": {**base, "run": {"devices": 1}}, "grid": grid}), None,
                   progress=False, evaluate_members=False)
    out["sweep_devices"] = [s4.summary["devices"], s1.summary["devices"]]
    out["sweep_sharding_devices"] = len(jax.tree.leaves(s4.runner.params)[0].sharding.device_set)
    out["sweep_param_diff"] = diff(s4.runner.params, s1.runner.params)
    print("RESULT" + json.dumps(out))
""")


def _run(script: str) -> dict:
    env = dict(os.environ)
    # (optimisation level 0 only halves compile time here: both sides of every
    # comparison are compiled with the same flags)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
                        " --xla_backend_optimization_level=0").strip()
    env["JAX_PLATFORMS"] = "cpu"
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT")][-1]
    out = json.loads(line[len("RESULT"):])
    out["progress_lines"] = [x for x in proc.stderr.splitlines() if x.startswith("[train]")]
    return out


@pytest.fixture(scope="module")
def result():
    return _run(SINGLE_SCRIPT)


@pytest.mark.slow
def test_single_run_shards_the_env_batch_over_four_devices(result):
    assert result["single_devices"] == [4, 1]
    assert result["obs_sharding_devices"] == 4
    assert result["obs_shard_shape"][0] == 16 // 4


@pytest.mark.slow
def test_progress_callbacks_work_on_the_sharded_program(result):
    updates = [line.split("| update ")[1].split()[0] for line in result["progress_lines"]
               if "| update " in line]
    assert updates == ["1/3", "2/3", "3/3"]


@pytest.mark.slow
def test_sharded_and_unsharded_single_runs_agree(result):
    assert result["single_param_diff"] < 1e-4 * max(1.0, result["single_param_scale"])
    sharded, plain = result["single_loss"]
    assert sharded == pytest.approx(plain, rel=1e-3, abs=1e-5)


@pytest.mark.slow
def test_sweep_shards_members_over_four_devices_and_agrees():
    result = _run(SWEEP_SCRIPT)
    assert result["sweep_devices"] == [4, 1]
    assert result["sweep_sharding_devices"] == 4
    assert result["sweep_param_diff"] < 1e-4
