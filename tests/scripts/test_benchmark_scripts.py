"""The benchmark scripts' own logic: programs that run both step forms, and
the renderers' arithmetic (no timing is asserted anywhere)."""

from __future__ import annotations

import jax
import pytest

from scripts.bench.throughput import scan_program
from scripts.bench.render_markdown import render, render_reset_cost

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


def test_comparison_table_gives_speedup_cartpole_ratio_compile_and_memory():
    from scripts.bench.render_markdown import render_comparison

    def row(env, sps, code, form="step"):
        return {**_row(env, 4096, sps, form), "code": code, "state_bytes_per_env": 1024.0,
                "temp_bytes_per_env": 512.0, "steps_per_cpu_second": 2 * sps}

    payload = {"benchmark": "core_throughput", "machine": MACHINE,
               "settings": {**SETTINGS, "before": "/tmp/before"},
               "results": [row("A", 1e6, "before"), row("A", 3e6, "after"),
                           row("A", 4e6, "after", "step_speculative"),
                           row("gymnax/CartPole-v1 (reference)", 2e6, "after")],
               "multi_agent": [{"env": "S", "num_agents": 64, "num_envs": 16, "code": code,
                                "agent_steps_per_second": sps}
                               for code, sps in (("before", 5e4), ("after", 2e5))]}
    text = render_comparison(payload)
    assert "| A | `step` | 4096 | 1.000 | 3.000 | 3.00× | 3.00× | 1.50× | 1.0 / 1.0 | " \
        "1.00 + 0.50 |" in text
    assert "| A | `step_speculative` | 4096 | — | 4.000 |  |  | 2.00× | — / 1.0 |" in text
    assert "| 64 | 16 | 0.050 | 0.200 | 4.00× |" in text
    assert text.startswith("<!-- before-after:begin -->")


def test_roofline_table_fractions_and_bounds():
    from scripts.bench.render_markdown import render_roofline

    peaks = {"elementwise_flops_per_second": 1e10, "matmul_flops_per_second": 5e10,
             "stream_bytes_per_second": 2e9, "elementwise_kernel": "poly",
             "matmul_kernel": "mm", "stream_kernel": "axpy"}
    times = {k: 1e-6 for k in ("step", "step_speculative", "step_env", "plume_advance",
                               "plume_read")}
    env = {"program": "g", "preset": "P", "flops_per_step": 1000.0, "bytes_per_step": 10.0,
           "transcendentals_per_step": 2.0, "random_words_per_transition": 1,
           "random_words_per_episode_start": 8, "steps_per_second": {"step": 2e6},
           "elementwise_fraction": 0.2, "seconds_per_step": times}
    payload = {"benchmark": "roofline", "machine": MACHINE, "peaks": peaks,
               "settings": {"batch": 4096, "repeats": 3}, "programs": [env]}
    text = render_roofline(payload)
    assert "**10.0 GFLOP/s**" in text and "**50.0 GFLOP/s**" in text and "**2.00 GB/s**" in text
    assert "| g (`P`) | 1,000 | 10 | 2 | 1 + 8 | 2.000 M | 20% | 10.00 M | | |" in text
    payload["programs"] = [{**env, "state_bytes_per_env": 1024.0}]
    assert "| 20% | 10.00 M | 1.00 | 0.98 M |" in render_roofline(payload)
    assert "| g | 1.000 | 1.000 | 1.000 | 1.000 | 1.000 |" in text


def test_roofline_counts_random_words_in_nested_jaxprs():
    """32-bit words of random_bits, also inside jit and cond; four 8-bit
    draws are one word."""
    from scripts.bench.roofline import random_words

    def draws(key):
        inner = jax.jit(lambda k: jax.random.bits(k, (3,)))(key)
        both = jax.lax.cond(True, lambda k: jax.random.bits(k, (2,)).sum(),
                            lambda k: jax.random.bits(k, (5,)).sum(), key)
        return inner, both, jax.random.bits(key, (4,), "uint8")

    assert random_words(jax.make_jaxpr(draws)(jax.random.key(0))) == 3 + 2 + 5 + 1


@pytest.mark.slow
def test_benchmark_before_after_run_labels_rows_and_reports_memory(tmp_path):
    """The --before harness end to end: two worker processes (here both on
    this tree), interleaved runs, rows labelled by code with memory per env."""
    import json
    import os

    from scripts.bench.throughput import main

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = tmp_path / "b.json"
    assert main(["--presets", "PlumeNav-Gaussian-v0", "--batch-sizes", "2", "--steps", "3",
                 "--repeats", "2", "--forms", "step", "step_speculative", "--no-reference",
                 "--skip-multi-agent", "--before", root, "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["results"]
    assert sorted((r["code"], r["step"]) for r in rows) == [
        ("after", "step"), ("after", "step_speculative"), ("before", "step"),
        ("before", "step_speculative")]
    for r in rows:
        assert len(r["run_seconds"]) == 2 and r["state_bytes_per_env"] > 0


@pytest.mark.slow  # end-to-end run of a benchmark option (compiles every program)
def test_benchmark_shared_plume_form_gives_one_row_per_agents_per_plume(tmp_path):
    """--forms step_batch_shared with --agents-per-plume K...: one row per K,
    labelled with it, next to step_batch's row."""
    import json

    from scripts.bench.throughput import main

    out = tmp_path / "s.json"
    assert main(["--presets", "PlumeNav-Gaussian-v0", "--batch-sizes", "4", "--steps", "3",
                 "--repeats", "1", "--forms", "step_batch", "step_batch_shared",
                 "--agents-per-plume", "1", "2", "--no-reference", "--skip-multi-agent",
                 "--out", str(out)]) == 0
    payload = json.loads(out.read_text())
    assert sorted((r["step"], r.get("agents_per_plume", 0)) for r in payload["results"]) == [
        ("step_batch", 0), ("step_batch_shared", 1), ("step_batch_shared", 2)]
    assert payload["settings"]["agents_per_plume"] == [1, 2]


def test_multi_agent_training_benchmark_uses_the_shipped_swarm_config():
    """The benchmark's configs are configs/train_swarm.yaml with only the
    agent count, the budget and (for "mlp") the network type changed."""
    from plume_jax.train.config import load_train_config, train_config
    from scripts.bench.multi_agent_training import ROOT, swarm_config

    shipped = load_train_config(ROOT / "configs" / "train_swarm.yaml")
    for network in ("gru", "mlp"):
        cfg = train_config(swarm_config(64, network, 2))
        assert cfg.env["overrides"]["num_agents"] == 64
        assert cfg.num_updates == 2
        assert cfg.network.type == network
        assert cfg.algo["num_envs"] == shipped.algo["num_envs"]
        assert cfg.env["id"] == shipped.env["id"] == "PlumeNav-Swarm-v0"


def test_compile_benchmark_table_gives_first_update_compile_and_throughput():
    from scripts.bench.compile_time import markdown

    row = {"program": "train", "label": "MLP", "env": "E", "env_steps": 8192,
           "init_seconds": 1.25, "compile_seconds": 2.5, "run_seconds": 4.0,
           "steps_per_second": 2048.0, "evaluation_seconds": None,
           "process_wall_seconds": 12.0, "load_before": [0.5, 0, 0], "load_after": [1.5, 0, 0],
           "command": "plume-jax train --config c.yaml"}
    text = markdown([row])
    assert "| `train` (MLP) | `E` | 8,192 | 1.2 | 2.5 | 4.0 | 2,048 | — | 12.0 | 0.50 → 1.50 |" \
        in text
    assert "- `plume-jax train --config c.yaml`" in text


@pytest.mark.slow
def test_compile_benchmark_runs_the_demo_through_the_cli(tmp_path, capsys):
    """The script runs ``plume-jax demo`` in a fresh process and records what
    the demo itself reports (its compile and run seconds)."""
    import json

    from scripts.bench.compile_time import main

    out = tmp_path / "compile.json"
    assert main(["--configs", "--demo-presets", "", "--demo-num-envs", "4",
                 "--json-out", str(out)]) == 0
    (row,) = json.loads(out.read_text())["results"]
    assert row["program"] == "demo" and row["env"] == "PlumeNav-Gaussian-v0"
    assert row["env_steps"] == 4 * 1000
    assert row["compile_seconds"] > 0 and row["run_seconds"] > 0
    assert row["process_wall_seconds"] > row["compile_seconds"] + row["run_seconds"]
    assert "plume-jax demo --json --quiet --out '' --num-envs 4" in capsys.readouterr().out


@pytest.mark.slow
def test_compile_benchmark_reads_train_summary(tmp_path):
    from scripts.bench.compile_time import train_row

    row = train_row("MLP", "configs/train_gaussian.yaml", 8192, tmp_path / "run")
    assert row["env_steps"] == 8192
    assert row["first_update_seconds"] == row["init_seconds"] + row["compile_seconds"]
    assert row["steps_per_second"] > 0 and row["evaluation_seconds"] > 0
    assert "--out '<run folder>'" in row["command"]


def test_adapter_table_gives_env_share_and_the_speculative_ratio():
    from scripts.bench.adapters import render_adapters

    def row(program, path, sps, share, **size):
        return {"env": "E", "program": program, "path": path, "steps_per_second": sps,
                "seconds_per_step": 64 / sps, "env_share": share, **size}

    text = render_adapters([
        row("jit step_batch", "ended only", 6.4e6, 1.0, num_envs=64),
        row("PlumeVectorEnv.step", "ended only", 3.2e5, 0.05, num_envs=64),
        row("PlumeVectorEnv.step", "speculative", 1.6e5, 0.025, num_envs=64),
        row("PlumeParallelEnv.step", "no reset speculated", 6.4e4, 0.5, num_agents=64)])
    assert "| `E` | `jit step_batch` | 64 | 6.400 M | 0.010 | 100% | — | — |" in text
    assert "| `E` | `PlumeVectorEnv.step` | 64 | 0.320 M | 0.200 | 5% | 0.160 M | 2.00× |" in text
    assert "| `E` | `PlumeParallelEnv.step` | 64 agents | 64.0 k | 1.000 | 50% | — | — |" in text
    assert text.count("PlumeVectorEnv") == 1  # the speculative row is a column, not a row


@pytest.mark.slow  # end-to-end run of a benchmark option (compiles every program)
def test_benchmark_adapters_option_measures_every_adapter(tmp_path, capsys):
    """``scripts/bench/throughput.py --adapters`` at tiny sizes: a row per adapter,
    path and size, with the env's share of each step."""
    import json

    from scripts.bench.throughput import main

    out = tmp_path / "adapters.json"
    assert main(["--adapters", "--adapter-presets", "PlumeNav-Gaussian-v0", "--batch-sizes",
                 "2", "--adapter-agents", "2", "--adapter-steps", "3", "--repeats", "1",
                 "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["results"]
    assert sorted((r["program"], r["path"]) for r in rows) == [
        ("PlumeParallelEnv.step", "no reset speculated"),
        ("PlumeSB3VecEnv.step", "ended only"), ("PlumeSB3VecEnv.step", "speculative"),
        ("PlumeVectorEnv.step", "ended only"), ("PlumeVectorEnv.step", "speculative"),
        ("jit step_batch", "ended only"), ("jit vmap(step), 1 env", "no reset speculated")]
    assert all(r["steps_per_second"] > 0 and r["env_share"] > 0 for r in rows)
    assert [r["env_share"] for r in rows if r["program"].startswith("jit")] == [1.0, 1.0]
    assert "| `PlumeNav-Gaussian-v0` | `PlumeSB3VecEnv.step` | 2 |" in capsys.readouterr().out


def test_speculative_adapter_steps_through_the_reference_path():
    """The benchmark's 'speculative' cells really take BatchCore's reference
    path (and it gives the shipped path's results)."""
    import numpy as np

    import plume_jax
    from plume_jax.gym import PlumeVectorEnv
    from scripts.bench.adapters import _speculative

    env, params = plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[12, 12], max_steps=3)
    shipped, reference = (PlumeVectorEnv(env, params, num_envs=3) for _ in range(2))
    calls = []
    original = type(reference._core).compiled_step

    def spy(core, actions, *, speculative=False):
        calls.append(speculative)
        return original(core, actions, speculative=speculative)

    type(reference._core).compiled_step = spy
    try:
        _speculative(reference._core)
        for vec in (shipped, reference):
            vec.reset(seed=5)
        for _ in range(4):  # an episode ends at step 3 in every env
            a, b = (vec.step(np.array([1, 2, 3])) for vec in (shipped, reference))
            np.testing.assert_allclose(a[0], b[0], rtol=1e-6)
    finally:
        type(reference._core).compiled_step = original
    assert calls == [False, True] * 4  # the shipped env, then the reference


@pytest.mark.parametrize("presets, agents_per_plume, allowed", [
    (["PlumeNav-Filament-v0"], "0", "a positive integer"),
    (["PlumeNav-Filament-v0"], "3", "a divisor of the batch size 64"),
    (["PlumeNav-Movie-v0"], "4", "1 for the movie plume"),
])
def test_bad_agents_per_plume_is_a_usage_error_before_any_worker_starts(
        tmp_path, capsys, presets, agents_per_plume, allowed):
    """Regression: a --agents-per-plume that does not fit the preset or the
    batch reached the workers, which died with 'benchmark worker died'."""
    from scripts.bench.throughput import main

    with pytest.raises(SystemExit) as exit_info:
        main(["--forms", "step_batch_shared", "--agents-per-plume", agents_per_plume,
              "--presets", *presets, "--batch-sizes", "64", "--steps", "2", "--repeats", "1",
              "--no-reference", "--skip-multi-agent", "--out", str(tmp_path / "x.json")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--agents-per-plume" in err and allowed in err
    assert not (tmp_path / "x.json").exists()


def test_machine_info_records_the_named_fields_under_the_scripts_keys():
    from scripts.bench.harness import FIELDS, machine_info

    info = machine_info("cpu_count", ("device", "device_platform"), "version:numpy",
                        ("stable_baselines3", "version:stable-baselines3"),
                        "version:no-such-distribution-xyz")
    assert list(info) == ["cpu_count", "device", "numpy", "stable_baselines3",
                          "no-such-distribution-xyz"]
    assert info["device"] == jax.devices()[0].platform
    assert info["no-such-distribution-xyz"] is None
    # every script's machine record comes from the one table of fields
    assert {"date", "platform", "processor", "cpu_model", "load_average", "jax",
            "plume_jax"} <= set(FIELDS)


def test_benchmark_scripts_do_not_import_one_another_in_a_cycle():
    """``bench/throughput.py`` imports ``bench/adapters.py`` (``--adapters``);
    the adapters module used to import the throughput script back."""
    import ast
    import pathlib

    scripts = pathlib.Path(__file__).resolve().parents[2] / "scripts"
    tree = ast.parse((scripts / "bench" / "adapters.py").read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {a.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                 for a in node.names}
    assert not {"throughput", "scripts.bench.throughput"} & imported, imported
    for name in ("bench/throughput", "bench/training", "bench/sb3", "bench/infotaxis",
                 "bench/compile_time", "validation/plume_validation"):
        source = (scripts / f"{name}.py").read_text()
        assert "harness import" in source, name
        assert "os.cpu_count()" not in source, name  # machine fields come from the harness
