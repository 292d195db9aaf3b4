"""The benchmark scripts' own logic: programs that run both step forms, and
the renderers' arithmetic (no timing is asserted anywhere)."""

from __future__ import annotations

import jax
import pytest

from scripts.benchmark import scan_program
from scripts.render_benchmarks import render, render_reset_cost

MACHINE = {"date": "2026-11-22T00:00:00+00:00", "cpu_count": 2, "processor": "x86_64",
           "device_platform": "cpu", "device_kind": "cpu", "jax": "0", "gymnax": "0",
           "plume_jax": "0", "load_average_1_5_15min": [0.5, 0.5, 0.5]}
SETTINGS = {"steps": 100, "repeats": 3, "actions": "uniform random", "multi_agent_steps": 50}


def _row(env, n, sps, form="step"):
    return {"env": env, "num_envs": n, "steps_per_second": sps, "compile_seconds": 1.0,
            "step": form}


@pytest.mark.parametrize("form", ["step", "step_env"])
def test_scan_program_runs_ours_and_gymnax_step_env(small_env, form):
    """--reset-cost once crashed on gymnax's step_env, which returns 5 values
    (obs, state, reward, done, info) where ours return 6."""
    import gymnax

    env, params = small_env
    cartpole, cp_params = gymnax.make("CartPole-v1")
    key = jax.random.key(0)
    for e, p in ((env, params), (cartpole, cp_params)):
        reset, run = scan_program(e, p, num_envs=2, num_steps=3, form=form)
        rewards, ends, obs_sum, _ = run(reset(key), key)
        assert rewards.shape == ends.shape == obs_sum.shape == ()


def test_reset_cost_table_gives_each_pair_and_the_reset_share():
    payload = {"benchmark": "reset_cost", "machine": MACHINE,
               "settings": {**SETTINGS, "step_forms": ["step", "step_batch", "step_env"]},
               "results": [_row("A", 64, 1e6), _row("A", 64, 3e6, "step_batch"),
                           _row("A", 64, 4e6, "step_env"), _row("C", 64, 1e6),
                           _row("C", 64, 2e6, "step_env"), _row("B", 64, 3e6)]}
    text = render_reset_cost(payload)
    assert "| A | 1.00 / 3.00 / 4.00 M (75%, 3.00×) | 1.0 / 1.0 |" in text
    assert "| C | 1.00 / — / 2.00 M (50%) | 1.0 / — |" in text
    assert "| B |  | 1.0 / — |" in text   # no step_env figure: no share invented
    assert text.startswith("<!-- reset-cost:begin -->")
    assert text.endswith("<!-- reset-cost:end -->")


def test_core_table_ignores_step_env_rows():
    payload = {"benchmark": "core_throughput", "machine": MACHINE,
               "settings": {**SETTINGS, "step_forms": ["step"]},
               "results": [_row("A", 64, 1_000.0), _row("A", 64, 4_000.0, "step_env")]}
    text = render(payload)
    assert "| A | 1,000 | 1.00 |" in text
    assert "4,000" not in text


def test_multi_agent_training_benchmark_uses_the_shipped_swarm_config():
    """The benchmark's configs are configs/train_swarm.yaml with only the
    agent count, the budget and (for "mlp") the network type changed."""
    from plume_jax.train.config import load_train_config, train_config
    from scripts.benchmark_multi_agent_training import ROOT, swarm_config

    shipped = load_train_config(ROOT / "configs" / "train_swarm.yaml")
    for network in ("gru", "mlp"):
        cfg = train_config(swarm_config(64, network, 2))
        assert cfg.env["overrides"]["num_agents"] == 64
        assert cfg.num_updates == 2
        assert cfg.network.type == network
        assert cfg.algo["num_envs"] == shipped.algo["num_envs"]
        assert cfg.env["id"] == shipped.env["id"] == "PlumeNav-Swarm-v0"
