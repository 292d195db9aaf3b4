"""``plume-jax record``: a video of a trained policy (RL Zoo's ``record_video``)::

    plume-jax record runs/train_gaussian --out gaussian.mp4
    plume-jax record runs/train_gaussian/policy --out four.gif --episodes 4 --seed 3
    plume-jax record zoo:filament-gru --out filament.gif
    plume-jax record ppo.zip --preset PlumeNav-Gaussian-v0 --out sb3.gif

``RUN`` is a run folder of ``plume-jax train`` (its ``policy/`` is read), an
exported policy folder (``policy.json`` + ``policy.npz``), a zoo agent
``zoo:NAME[@VERSION]`` or an SB3 model ``.zip``, loaded as ``plume-jax
evaluate`` loads agents (:func:`agents.registry.make_agent`: ``trained``, the
zoo reference, ``sb3``). The policy drives the env it was trained on (the
settings recorded in ``policy.json``; a zoo entry's preset and own sensor);
an SB3 model records no env, so it needs ``--preset``. ``--set NAME=VALUE``
overrides a setting of that env and ``--preset ID`` runs a preset instead,
each checked against the policy before anything runs. ``--episodes``
episodes run side by side (:func:`plume_jax.render.video.record_batch`; one jitted
rollout, or for an SB3 model jitted env steps with the model acting on the
host), greedy unless ``--sample``, for at most ``--steps`` steps (default:
the env's ``max_steps``). The video stops at the step where the last
episode ended (an episode that ends earlier holds its last frame). The
video is ``.gif`` (no ffmpeg needed) or ``.mp4`` (``imageio-ffmpeg``, the
``video`` extra); an existing ``--out`` is refused unless ``--overwrite``.
One line per episode reports success, steps and return.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import pathlib
from typing import Any

from plume_jax.cli.common import check_output_file
from plume_jax.settings import parse_overrides
from plume_jax.core.errors import ValidationError

#: What ``RUN`` may be, for messages.
RUN_ALLOWED = ("a run folder of `plume-jax train` (holding policy/), an exported policy "
               "folder (policy.json and policy.npz), a zoo agent zoo:NAME[@VERSION] "
               "(plume-jax list --zoo) or an SB3 model file (.zip)")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("record", help="record a video of a trained policy",
                       description="Record a video (.gif or .mp4) of a trained policy.")
    p.add_argument("run", metavar="RUN",
                   help="run folder of `plume-jax train` or its policy/, a zoo agent "
                   "zoo:NAME[@VERSION], or an SB3 model .zip (with --preset)")
    p.add_argument("--out", required=True, help="the video file: .gif or .mp4")
    p.add_argument("--episodes", type=int, default=1,
                   help="episodes, recorded side by side (default 1)")
    p.add_argument("--steps", type=int, default=None,
                   help="at most this many steps per episode (default: the env's max_steps); "
                   "the video stops when the last episode ends")
    p.add_argument("--seed", type=int, default=0, help="seed of the episodes (default 0)")
    p.add_argument("--scale", type=int, default=4, help="pixels per grid cell (default 4)")
    p.add_argument("--fps", type=float, default=10.0, help="frames per second (default 10)")
    p.add_argument("--preset", default=None,
                   help="run this preset instead of the policy's training env")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="override a setting of the env (repeatable)")
    p.add_argument("--sample", action="store_true",
                   help="sample actions from the policy instead of taking the greedy one "
                   "(an SB3 model: non-deterministic predictions)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out file")


def policy_folder(run: str) -> pathlib.Path:
    """The exported policy folder of ``run`` (a run folder or a policy folder).

    Raises:
        ValidationError: (``RUN``) neither holds ``policy.json``.
    """
    path = pathlib.Path(run)
    for folder in (path, path / "policy"):
        if (folder / "policy.json").is_file():
            return folder
    raise ValidationError.for_parameter("RUN", run, RUN_ALLOWED)


def _check_video_writer(out: str) -> None:
    """The libraries writing ``out`` are installed (checked before the rollout)."""
    missing = None
    if importlib.util.find_spec("imageio") is None:
        missing = "imageio: pip install 'plume-jax[video]'"
    elif out.lower().endswith(".mp4") and importlib.util.find_spec("imageio_ffmpeg") is None \
            and importlib.util.find_spec("av") is None:
        missing = "an ffmpeg backend for MP4: pip install imageio-ffmpeg (or write a .gif)"
    if missing:
        raise ValidationError.for_parameter("--out", out, f"a video format whose writer is "
                                                          f"installed; missing {missing}")


def _env_for(spec: dict[str, Any], preset: str | None, overrides: dict[str, Any]):
    """``(env, params)``: ``preset`` with ``overrides``, else the policy's
    training env (its recorded settings) with ``overrides``."""
    from plume_jax.envs.presets import build_env, make, merge_overrides

    if preset is not None:
        return make(preset, **overrides)
    settings = spec.get("env") or {}
    if not settings:
        raise ValidationError.for_parameter(
            "--preset", None, "a preset id: this policy does not record its training env")
    return build_env(merge_overrides(settings, overrides))


def _agent_and_env(args: argparse.Namespace) -> tuple[str, dict[str, Any], Any, Any]:
    """``(agent name, agent params, env, params)`` for ``RUN``: the
    registry's ``trained`` agent for a policy folder, the zoo reference, or
    ``sb3`` for a ``.zip``, with the env it runs on."""
    from agents.zoo import is_zoo_reference, resolve
    from plume_jax.envs.presets import make

    overrides = parse_overrides(args.set)
    if is_zoo_reference(args.run):
        entry = resolve(args.run)
        env, params = make(args.preset or entry.preset, **{**entry.env_overrides, **overrides})
        return args.run, {"greedy": not args.sample}, env, params
    if args.run.lower().endswith(".zip") and not os.path.isdir(args.run):
        if args.preset is None:
            raise ValidationError.for_parameter(
                "--preset", None, f"a preset id for the SB3 model {args.run} (an SB3 model "
                "records its spaces, not its env)")
        env, params = make(args.preset, **overrides)
        return "sb3", {"path": args.run, "deterministic": not args.sample}, env, params
    from agents.trained import load_policy_files

    folder = policy_folder(args.run)
    spec, _ = load_policy_files(folder)
    env, params = _env_for(spec, args.preset, overrides)
    return "trained", {"path": str(folder), "greedy": not args.sample}, env, params


def record(args: argparse.Namespace) -> dict[str, Any]:
    """Check everything, run the rollout, write the video; returns
    :func:`plume_jax.render.video.record_batch`'s summary."""
    from agents.registry import make_agent
    from plume_jax.envs.multi_agent import MultiAgentPlumeEnv
    from plume_jax.core.seeding import check_seed, seed_key
    from plume_jax.render.video import VIDEO_FORMATS, record_batch

    check_output_file(args.out, "--out", VIDEO_FORMATS)
    if os.path.exists(args.out) and not args.overwrite:
        raise ValidationError.for_parameter("--out", args.out,
                                            "a file that does not exist yet (or --overwrite)")
    _check_video_writer(args.out)
    for option, value, low in (("--episodes", args.episodes, 1), ("--scale", args.scale, 1),
                               ("--steps", args.steps, 1)):
        if value is not None and value < low:
            raise ValidationError.for_parameter(option, value, f"an integer >= {low}")
    key = seed_key(check_seed(args.seed, "--seed"))
    name, agent_params, env, params = _agent_and_env(args)
    if isinstance(env, MultiAgentPlumeEnv):
        raise ValidationError.for_parameter(
            "RUN", args.run, "a single-agent policy (record draws single-agent envs; this "
                             f"env has {env.num_agents} agents)")
    policy = make_agent(name, env, **agent_params)
    steps = int(params.max_steps) if args.steps is None else args.steps
    return record_batch(args.out, env, params, policy, key, num_envs=args.episodes,
                        num_steps=steps, scale=args.scale, fps=args.fps, until_done=True)


def run(args: argparse.Namespace) -> int:
    summary = record(args)
    for i in range(len(summary["success"])):
        print(f"episode {i}: {'reached the source' if summary['success'][i] else 'no success'}, "
              f"{int(summary['length'][i])} steps, return {float(summary['return'][i]):.3f}")
    print(f"wrote {summary['path']} ({summary['frames']} frames)")
    return 0
