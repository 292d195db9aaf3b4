"""Training across several processes (``plume_jax.train.distributed``).

- Which launches ask for a multi-process run (flags, ``JAX_*`` variables,
  SLURM, Cloud TPU) and the errors for malformed ones: pure functions of an
  environment mapping, no JAX system started.
- End to end (slow: every process compiles the training program, about a
  minute each on 2 loaded cores): ``plume-jax train`` started as 2
  processes on localhost with gloo CPU collectives, 1 CPU device each,
  trains half the budget and is resumed by 2 processes to the full budget;
  it must equal ``plume-jax train`` in 1 process with 2 devices and the
  same global batch, trained in one go, and write one set of outputs. The
  reference uses 2 devices so that both runs compile the same SPMD program
  over a 2-device mesh (the env batch split in two halves, the same
  collectives); sharded against unsharded training is
  ``tests/train/test_train_sharding.py``'s business.
"""

from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import sys

import numpy as np
import pytest

from plume_jax.core.errors import StateError, ValidationError
from plume_jax.train.config import train_config
from plume_jax.train.distributed import Launch, check_joined, initialize, join, \
    requested_launch

ROOT = pathlib.Path(__file__).resolve().parents[2]

SLURM = {"SLURM_JOB_ID": "42", "SLURM_STEP_NODELIST": "node[1-2]", "SLURM_NTASKS": "2",
         "SLURM_PROCID": "1", "SLURM_LOCALID": "0"}


# ------------------------------------------------------------ launch rules
def test_single_process_when_nothing_asks_for_more():
    assert requested_launch("auto", environ={}) is None
    assert requested_launch("off", environ=SLURM) is None
    assert requested_launch("auto", environ={**SLURM, "SLURM_NTASKS": "1"}) is None
    assert requested_launch("auto", environ={"TPU_WORKER_HOSTNAMES": "t1"}) is None


def test_flags_name_the_whole_system():
    launch = requested_launch("auto", coordinator="10.0.0.1:1234", num_processes=4,
                              process_id=3, environ=SLURM)
    assert launch == Launch("command line", "10.0.0.1:1234", 4, 3)


def test_launcher_environments_are_detected():
    assert requested_launch("auto", environ=SLURM) == Launch("SLURM")
    assert requested_launch("auto", environ={"TPU_WORKER_HOSTNAMES": "t0,t1,t2,t3"}) \
        == Launch("Cloud TPU")
    jax_vars = {"JAX_COORDINATOR_ADDRESS": "host:99", "JAX_NUM_PROCESSES": "2",
                "JAX_PROCESS_ID": "0"}
    assert requested_launch("auto", environ={**SLURM, **jax_vars}) \
        == Launch("JAX_* variables", "host:99", 2, 0)
    assert requested_launch("cluster", environ={}) == Launch("run.distributed: cluster")


@pytest.mark.parametrize("kwargs, environ, parameter", [
    ({"coordinator": "h:1", "num_processes": 2}, {}, "--process-id"),
    ({"num_processes": 2, "process_id": 0}, {}, "--coordinator"),
    ({"coordinator": "h", "num_processes": 2, "process_id": 0}, {}, "--coordinator"),
    ({"coordinator": "h:1", "num_processes": 0, "process_id": 0}, {}, "--num-processes"),
    ({"coordinator": "h:1", "num_processes": 2, "process_id": 2}, {}, "--process-id"),
    ({}, {"JAX_COORDINATOR_ADDRESS": "h:1", "JAX_NUM_PROCESSES": "2"}, "JAX_PROCESS_ID"),
    ({}, {"JAX_COORDINATOR_ADDRESS": "h:1", "JAX_NUM_PROCESSES": "two",
          "JAX_PROCESS_ID": "0"}, "JAX_NUM_PROCESSES"),
    ({}, {**SLURM, "SLURM_NTASKS": "many"}, "SLURM_NTASKS"),
])
def test_malformed_launches_name_the_setting(kwargs, environ, parameter):
    with pytest.raises(ValidationError) as error:
        requested_launch("auto", environ=environ, **kwargs)
    assert error.value.parameter == parameter


def test_flags_contradicting_distributed_off_are_refused():
    with pytest.raises(ValidationError, match="run.distributed"):
        requested_launch("off", coordinator="h:1", num_processes=2, process_id=0, environ={})


def test_run_distributed_is_checked_by_the_config():
    base = {"env": {"id": "PlumeNav-Gaussian-v0"}, "algo": {"total_steps": 10**5}}
    assert train_config(base).run["distributed"] == "auto"
    with pytest.raises(ValidationError) as error:
        train_config({**base, "run": {"distributed": "yes"}})
    assert error.value.parameter == "run.distributed"


def test_joining_after_jax_has_computed_is_a_state_error():
    import jax

    jax.numpy.zeros(1).block_until_ready()  # this process has computed
    before = jax.config.jax_cpu_collectives_implementation
    try:
        with pytest.raises(StateError, match="before any other JAX computation"):
            initialize(Launch("command line", "127.0.0.1:1", 2, 0))
    finally:
        jax.config.update("jax_cpu_collectives_implementation", before)
    assert not jax.distributed.is_initialized()


def test_join_without_a_launch_stays_a_single_process():
    import jax

    assert join("off") is False and join("auto") is False  # no launcher here
    assert jax.process_count() == 1 and not jax.distributed.is_initialized()


def test_train_refuses_to_run_alone_when_the_launcher_asks_for_several(tmp_path, monkeypatch):
    from plume_jax.train.run import train

    for name, value in SLURM.items():
        monkeypatch.setenv(name, value)
    config = train_config({"env": {"id": "PlumeNav-Gaussian-v0"},
                           "algo": {"total_steps": 10**5}})
    with pytest.raises(StateError, match="SLURM asks for a run of several processes"):
        train(config, tmp_path / "run")
    assert not (tmp_path / "run").exists()
    check_joined("off")  # the way out the message names: no error


def test_sweep_refuses_to_run_alone_when_the_launcher_asks_for_several(tmp_path,
                                                                        monkeypatch):
    from plume_jax.train.sweep import run_sweep, sweep_config

    for name, value in SLURM.items():
        monkeypatch.setenv(name, value)
    config = sweep_config({"base": {"env": {"id": "PlumeNav-Gaussian-v0"},
                                    "algo": {"total_steps": 10**5}},
                           "grid": {"run.seed": [0, 1]}})
    with pytest.raises(StateError, match="SLURM asks for a run of several processes"):
        run_sweep(config, tmp_path / "sweep")
    assert not (tmp_path / "sweep").exists()


# ------------------------------------------------------------ end to end
CONFIG = {
    "env": {"id": "PlumeNav-Gaussian-v0",
            "overrides": {"grid_size": [16, 16], "sigma": 4.0, "goal_radius": 1.5,
                          "max_steps": 20}},
    # anneal_lr off: the resumed half continues the same learning rate
    "algo": {"total_steps": 4 * 16 * 16, "num_envs": 16, "num_steps": 16, "update_epochs": 2,
             "num_minibatches": 2, "learning_rate": 3e-3, "anneal_lr": False,
             "normalize_obs": True},
    "network": {"hidden_sizes": [16, 16]},
    "run": {"log_every": 1, "checkpoint_minutes": None},
    "eval": {"num_envs": 8, "num_steps": 20},
}


def _env(devices: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "JAX_", "TPU_"))}
    env.update(PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu",
               XLA_FLAGS=f"--xla_force_host_platform_device_count={devices} "
               "--xla_backend_optimization_level=0")
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(args: list[str], processes: int, devices: int, cwd: pathlib.Path) -> list[str]:
    """Run ``plume-jax ARGS`` as ``processes`` processes of ``devices`` CPU
    devices each; returns every process's output (checked: exit 0)."""
    command = [sys.executable, "-m", "plume_jax.cli", *args]
    if processes > 1:
        port = _free_port()
        runs = [subprocess.Popen(
            command + ["--coordinator", f"127.0.0.1:{port}", "--num-processes",
                       str(processes), "--process-id", str(i)],
            cwd=cwd, env=_env(devices), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True) for i in range(processes)]
    else:
        runs = [subprocess.Popen(command, cwd=cwd, env=_env(devices), stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)]
    outputs = []
    try:
        for run in runs:
            outputs.append(run.communicate(timeout=600)[0])
    finally:
        for run in runs:
            if run.poll() is None:
                run.kill()
    for run, output in zip(runs, outputs):
        assert run.returncode == 0, output[-4000:]
    return outputs


def _files(folder: pathlib.Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("distributed")
    (tmp / "tiny.yaml").write_text(json.dumps(CONFIG))
    half = str(2 * 16 * 16)
    first = _launch(["train", "--config", "tiny.yaml", "--out", "two", "--total-steps", half],
                    2, 1, tmp)
    files_after_first = _files(tmp / "two")
    resumed = _launch(["train", "--resume", "two", "--total-steps", str(4 * 16 * 16)], 2, 1,
                      tmp)
    reference = _launch(["train", "--config", "tiny.yaml", "--out", "one"], 1, 2, tmp)
    return {"tmp": tmp, "first": first, "resumed": resumed, "reference": reference,
            "files_after_first": files_after_first}


def _rows(folder: pathlib.Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_two_processes_equal_one_process_with_the_same_global_batch(runs):
    tmp = runs["tmp"]
    two, one = _rows(tmp / "two"), _rows(tmp / "one")
    assert [r["update"] for r in two] == [1, 2, 3, 4]  # each update once, resume included
    assert [r["update"] for r in one] == [1, 2, 3, 4]
    for a, b in zip(two, one):
        assert a.keys() == b.keys()
        for key in a:
            if a[key] is None or b[key] is None:
                assert a[key] == b[key], key
            else:
                assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-6), (a["update"], key)
    p2, p1 = np.load(tmp / "two/policy/policy.npz"), np.load(tmp / "one/policy/policy.npz")
    assert sorted(p2.files) == sorted(p1.files)
    for name in p1.files:
        np.testing.assert_allclose(p2[name], p1[name], rtol=1e-4, atol=1e-6, err_msg=name)
    summary = json.loads((tmp / "two/summary.json").read_text())
    assert (summary["processes"], summary["devices"]) == (2, 2)
    assert summary["resumed_at_update"] == 2 and summary["env_steps_total"] == 4 * 256


@pytest.mark.slow
def test_two_processes_write_one_set_of_outputs(runs):
    tmp = runs["tmp"]
    kept = "checkpoints/update_00000002/"  # the finished run's state, kept when it was continued
    names = [f for f in _files(tmp / "two") if not f.startswith(("tensorboard/", kept))]
    assert names == [f for f in _files(tmp / "one") if not f.startswith("tensorboard/")]
    assert {"meta.json", "policy/policy.npz"} <= {
        f.removeprefix(kept) for f in _files(tmp / "two") if f.startswith(kept)}
    # one TensorBoard writer (process 0's): one event file and one of its hparams; a
    # resume rewrites both
    for files in (runs["files_after_first"], _files(tmp / "two")):
        events = [f.rsplit(".", 2)[0] for f in files if f.startswith("tensorboard/")]
        assert events == ["tensorboard/events.out.tfevents",
                          "tensorboard/hparams/events.out.tfevents"], files
    assert not [p for p in (tmp / "two").rglob("*") if ".tmp-" in p.name]
    for session in ("first", "resumed"):
        main_out, other_out = runs[session]
        assert "outputs in two/" in main_out and "[train]" in main_out
        assert "outputs in" not in other_out and "[train]" not in other_out


@pytest.mark.slow
def test_a_sweep_across_two_processes_equals_one_process_and_writes_once(tmp_path):
    sweep = {"base": {**CONFIG, "algo": {**CONFIG["algo"], "total_steps": 2 * 16 * 16}},
             "grid": {"run.seed": [0, 1]}}
    (tmp_path / "sweep.yaml").write_text(json.dumps(sweep))
    two = _launch(["sweep", "--config", "sweep.yaml", "--out", "two"], 2, 1, tmp_path)
    _launch(["sweep", "--config", "sweep.yaml", "--out", "one"], 1, 2, tmp_path)
    assert "outputs in two/" in two[0] and "outputs in" not in two[1]
    names = [f for f in _files(tmp_path / "two") if "/tensorboard/" not in f]
    assert names == [f for f in _files(tmp_path / "one") if "/tensorboard/" not in f]
    members = sorted((tmp_path / "two/members").iterdir())
    assert [m.name for m in members] == ["seed-0", "seed-1"]
    for folder in members:  # one writer: one event file (and one of its hparams), each update once
        events = sorted(str(p.relative_to(folder)) for p in folder.rglob("events.out.tfevents.*"))
        assert [e.rsplit(".", 2)[0] for e in events] == [
            "tensorboard/events.out.tfevents", "tensorboard/hparams/events.out.tfevents"]
        assert [r["update"] for r in _rows(folder)] == [1, 2]
    r2 = json.loads((tmp_path / "two/results.json").read_text())
    r1 = json.loads((tmp_path / "one/results.json").read_text())
    assert r2["devices"] == r1["devices"] == 2
    for a, b in zip(r2["results"], r1["results"]):
        for key, value in b.items():
            if isinstance(value, float):
                assert a[key] == pytest.approx(value, rel=1e-4, abs=1e-6), key
            else:
                assert a[key] == value, key
    for member in (tmp_path / "one/members").iterdir():
        p1 = np.load(member / "policy/policy.npz")
        p2 = np.load(tmp_path / "two/members" / member.name / "policy/policy.npz")
        for name in p1.files:
            np.testing.assert_allclose(p2[name], p1[name], rtol=1e-4, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("kwargs, parameter", [
    ({"num_processes": True, "process_id": 0}, "num_processes"),
    ({"num_processes": "2", "process_id": 0}, "num_processes"),
    ({"num_processes": 2, "process_id": False}, "process_id"),
    ({"num_processes": 2, "process_id": 2}, "process_id"),
    ({"num_processes": 0}, "num_processes"),
    ({"process_id": -1}, "process_id"),
])
def test_initialize_refuses_counts_jax_would_misread(kwargs, parameter):
    """``initialize(Launch(...))`` is public: a bool or string count was
    passed on to ``jax.distributed.initialize`` (which reads True as 1)."""
    with pytest.raises(ValidationError) as error:
        initialize(Launch("script", "127.0.0.1:1234", **kwargs))
    assert error.value.parameter == parameter
    import jax

    assert not jax.distributed.is_initialized()
