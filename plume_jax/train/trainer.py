"""``train(config)``: one training run from a validated config, as used by
``plume-jax train``.

The run compiles ``PPO.run`` over a chunk of updates once — rollout, GAE and
the minibatch epochs of every update in the chunk are one XLA program — and
calls it until the update budget is spent. A chunk is the whole run unless
``run.checkpoint_every`` asks for checkpoints in between (a shorter last
chunk compiles once more). Progress lines come from inside the program
(``jax.debug.callback``). Afterwards the policy is exported, reloaded from
disk as an ``agents.trained.TrainedPolicy`` and evaluated greedily on fresh
seeds (:mod:`plume_jax.train.evaluation`).

Output folder (``out_dir``)::

    config.yaml          the resolved config (every default spelled out)
    metrics.jsonl        one JSON object per update (appended on resume)
    metrics.csv          the same as a table
    learning_curve.png   success rate and mean return against env steps
    checkpoint/          the last checkpoint (resume with --resume)
    checkpoints/         the intermediate checkpoints (update_<N>/), when
                         run.checkpoint_every is set
    policy/              the exported policy (agents.trained)
    summary.json         budget, timings, throughput, evaluation
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import json
import pathlib
import platform
import time
from typing import Any, TextIO

import jax
import numpy as np

from plume_jax.train.checkpoint import export_policy, load_checkpoint, policy_arrays, \
    policy_spec, save_checkpoint
from plume_jax.train.config import TrainConfig, dump_yaml
from plume_jax.train.evaluation import evaluate as evaluate_episodes
from plume_jax.train.ppo import PPO, Hparams, PPOStatic, resolve_gamma
from plume_jax.train.progress import Progress, append_jsonl, metric_rows, \
    plot_learning_curves, read_jsonl, write_csv
from plume_jax.train.sharding import mesh as make_mesh, resolve_devices, shard_runner


def ppo_static(config: TrainConfig) -> PPOStatic:
    a = config.algo
    return PPOStatic(num_envs=a["num_envs"], num_steps=a["num_steps"],
                     update_epochs=a["update_epochs"], num_minibatches=a["num_minibatches"],
                     num_updates=config.num_updates, anneal_lr=a["anneal_lr"],
                     clip_value=a["clip_value"], adam_eps=a["adam_eps"],
                     normalize_obs=a["normalize_obs"],
                     normalize_advantages=a["normalize_advantages"], network=config.network)


def hparams(config: TrainConfig, env: Any, env_params: Any) -> Hparams:
    a = config.algo
    return Hparams.create(learning_rate=a["learning_rate"], ent_coef=a["ent_coef"],
                          vf_coef=a["vf_coef"], gamma=resolve_gamma(env, env_params, a["gamma"]),
                          gae_lambda=a["gae_lambda"], clip_eps=a["clip_eps"],
                          max_grad_norm=a["max_grad_norm"])


@dataclasses.dataclass
class TrainResult:
    """What :func:`train` returns.

    Attributes:
        config: the config trained.
        algo: the ``PPO`` object (network, spaces).
        runner: the final runner (parameters, optimiser and env state).
        rows: per-update metrics of this call (one dict per update).
        summary: budget, timings, throughput, evaluation (also
            ``summary.json``).
        out_dir: the output folder, or None.
    """

    config: TrainConfig
    algo: PPO
    runner: Any
    rows: list[dict[str, Any]]
    summary: dict[str, Any]
    out_dir: pathlib.Path | None

    def policy(self, greedy: bool = True):
        """The trained policy as an ``agents.trained.TrainedPolicy``."""
        from agents.trained import TrainedPolicy

        spec = policy_spec(self.algo, self.algo.env.settings)
        arrays = policy_arrays(self.runner.params, self.runner.obs_stats
                               if self.algo.static.normalize_obs else None)
        return TrainedPolicy(spec, arrays, greedy=greedy)


def machine_info() -> dict[str, Any]:
    import os

    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
    }


def train(config: TrainConfig, out_dir: str | pathlib.Path | None = None, *,
          progress: bool = True, stream: TextIO | None = None,
          resume: str | pathlib.Path | None = None, evaluate: bool = True) -> TrainResult:
    """Train with ``config``; see the module docstring for the output folder.

    Args:
        config: a validated :class:`TrainConfig`.
        out_dir: output folder (None: write nothing, return only).
        progress: print progress lines (to ``stream``, default stdout).
        resume: a checkpoint folder to continue from (same config).
        evaluate: run the greedy evaluation at the end.
    """
    t_wall = time.perf_counter()
    out = pathlib.Path(out_dir) if out_dir is not None else None
    env, env_params = config.make_env()
    static = ppo_static(config)
    hp = hparams(config, env, env_params)
    if config.algo["algorithm"] == "lookahead_vi":  # one device: no env-batch sharding
        from plume_jax.train.lookahead import LookaheadVI

        n_dev, mesh = 1, None
        algo = LookaheadVI(env, env_params, static, epsilon=config.algo["epsilon"])
    else:
        n_dev = resolve_devices(config.run["devices"], static.num_envs, "algo.num_envs")
        mesh = make_mesh(n_dev, "envs") if n_dev > 1 else None
        algo = PPO(env, env_params, static, mesh=mesh)
    key = jax.random.key(config.run["seed"])
    num_updates = config.num_updates
    per_update = config.steps_per_update

    t0 = time.perf_counter()
    if resume is not None:
        template = jax.eval_shape(algo.init, key, hp, env_params)
        runner, _ = load_checkpoint(resume, template)
    else:
        runner = jax.block_until_ready(jax.jit(algo.init)(key, hp, env_params))
    if mesh is not None:
        runner = shard_runner(runner, mesh, "envs")
    init_s = time.perf_counter() - t0

    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.yaml").write_text(dump_yaml(config.to_dict()))
        if resume is None:
            (out / "metrics.jsonl").unlink(missing_ok=True)

    printer = Progress(num_updates, stream) if progress else None
    chunk = config.run["checkpoint_every"] or num_updates
    programs: dict[int, Any] = {}
    compile_s = run_s = 0.0
    rows: list[dict[str, Any]] = []
    done = int(runner.update)
    start_update = done
    while done < num_updates:
        n = min(chunk, num_updates - done)
        if n not in programs:
            t0 = time.perf_counter()
            fn = jax.jit(functools.partial(algo.run, num_updates=n, callback=printer,
                                           log_every=config.run["log_every"]))
            programs[n] = fn.lower(runner, hp, env_params).compile()
            compile_s += time.perf_counter() - t0
        if printer is not None:
            printer.restart(done * per_update)
        t0 = time.perf_counter()
        runner, metrics = programs[n](runner, hp, env_params)
        jax.block_until_ready(runner)
        run_s += time.perf_counter() - t0
        new_rows = metric_rows(jax.device_get(metrics))
        rows += new_rows
        done += n
        if out is not None:
            append_jsonl(out / "metrics.jsonl", new_rows)
            meta = {"config": config.to_dict(), "update": done, "num_updates": num_updates}
            save_checkpoint(out / "checkpoint", runner, meta)
            if done < num_updates:
                save_checkpoint(out / "checkpoints" / f"update_{done:08d}", runner, meta)

    trained_steps = (done - start_update) * per_update
    summary: dict[str, Any] = {
        "env": env.settings.get("id", env.name),
        "config": config.to_dict(),
        "num_updates": num_updates,
        "updates_this_call": done - start_update,
        "env_steps_total": done * per_update,
        "env_steps_this_call": trained_steps,
        "devices": n_dev,
        "init_seconds": init_s,
        "compile_seconds": compile_s,
        "train_seconds": run_s,
        "steps_per_second_excl_compile": trained_steps / run_s if run_s > 0 else None,
        "steps_per_second_incl_compile": (trained_steps / (run_s + compile_s + init_s)
                                          if trained_steps else None),
    }
    result = TrainResult(config=config, algo=algo, runner=runner, rows=rows, summary=summary,
                         out_dir=out)
    if out is not None:
        export_policy(out / "policy", algo, runner, env.settings,
                      {"trained_env_steps": done * per_update})
    summary["train_wall_seconds"] = time.perf_counter() - t_wall
    if evaluate:
        from agents.trained import TrainedPolicy

        policy = (TrainedPolicy.load(out / "policy", greedy=config.eval["greedy"])
                  if out is not None else result.policy(greedy=config.eval["greedy"]))
        num_steps = config.eval["num_steps"] or int(np.asarray(env_params.max_steps))
        summary["evaluation"] = evaluate_episodes(env, policy.spec, policy.params, env_params,
                                         config.eval["seed"], config.eval["num_envs"],
                                         num_steps, greedy=config.eval["greedy"])
    summary["wall_seconds"] = time.perf_counter() - t_wall
    summary["machine"] = machine_info()
    summary["finished_at"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    if out is not None:
        all_rows = read_jsonl(out / "metrics.jsonl")
        write_csv(out / "metrics.csv", all_rows)
        plot_learning_curves(out / "learning_curve.png", {summary["env"]: all_rows},
                             title=f"PPO ({config.network.type}) on {summary['env']}")
        (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return result


def print_summary(summary: dict[str, Any], stream: TextIO | None = None) -> None:
    import sys

    stream = stream or sys.stdout
    p = functools.partial(print, file=stream)
    p(f"trained {summary['env_steps_this_call']:,} env steps ({summary['updates_this_call']} "
      f"updates, {summary['env_steps_total']:,} in total) on {summary['env']}")
    sps = summary["steps_per_second_excl_compile"]
    p(f"compile {summary['compile_seconds']:.1f} s, train {summary['train_seconds']:.1f} s"
      + (f" ({sps:,.0f} env steps/s excluding compile)" if sps else ""))
    ev = summary.get("evaluation")
    if ev:
        kind = "greedy" if ev["greedy"] else "sampled"
        steps = ev["mean_steps_to_goal"]
        p(f"{kind} evaluation on {ev['episodes']} fresh episodes (seed {ev['seed']}): "
          f"success {100 * ev['success_rate']:.1f}% ({ev['successes']}/{ev['episodes']})"
          + (f", mean steps to goal {steps:.1f}" if steps is not None else ""))
    p(f"wall time {summary['wall_seconds']:.1f} s")
