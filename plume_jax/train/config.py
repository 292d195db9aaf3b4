"""Training configuration: YAML in, validated frozen dataclasses out.

Five sections (``env``, ``algo``, ``network``, ``run``, ``eval``); every key
is optional but ``env.id`` (or ``env.config``) and ``algo.total_steps``. Each
key is declared once as a :class:`plume_jax.settings.Setting`: the schemas
below, and for ``algo`` :data:`COMMON_ALGO` plus the chosen algorithm's own
(:func:`schemas`); docs/config_reference.md is generated from them, and
docs/training.md shows examples. Bad keys and values raise
``ValidationError`` through :func:`plume_jax.settings.resolve_keys`. Any
setting can be given by its dotted name (``run.seed``,
``env.overrides.sigma``, ``env.reward.scale``): :func:`apply_dotted`, behind
``--set`` and sweep grids.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import pathlib
from collections.abc import Mapping
from typing import Any

import yaml

from plume_jax.core.errors import ValidationError
from plume_jax.settings import REQUIRED, Setting, resolve_keys, unknown_setting
from plume_jax.settings.schema import declared_settings
from plume_jax.settings.checks import boolean, choice, count, optional, real
from plume_jax.train.algorithms.base import algo_setting, algorithm_class, readers, settings_for
from plume_jax.train.lane_schedule import lanes_check
from plume_jax.train.algorithms.networks import NetworkConfig


# --------------------------------------------------------------------- checkers
# plume_jax.settings' checkers (the messages and bounds of component settings),
# and these kinds of value of the training config's own.


def devices_check(name: str, value: Any, grid: Any = None) -> str | int:
    """``'auto'`` or a number of devices."""
    if value == "auto":
        return "auto"
    try:
        return count(low=1, high=65536)(name, value, grid)
    except ValidationError:
        raise ValidationError.for_parameter(name, value, "'auto' or an integer >= 1") from None


def mapping_check(name: str, value: Any, grid: Any = None) -> dict:
    """A mapping (``None``: empty), deep-copied."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValidationError.for_parameter(name, value, "a mapping of settings")
    return copy.deepcopy(dict(value))


def string_or_none(name: str, value: Any, grid: Any = None) -> str | None:
    """A string or ``None``."""
    if value is not None and not isinstance(value, str):
        raise ValidationError.for_parameter(name, value, "a string or null")
    return value


def path_or_none(name: str, value: Any, grid: Any = None) -> str | None:
    """A path (a string that is not empty or only spaces) or ``None``: an
    empty path would name the current folder, or nothing, without a word."""
    value = string_or_none(name, value, grid)
    if value is not None and not value.strip():
        raise ValidationError.for_parameter(name, value, "a path (not empty) or null")
    return value


# --------------------------------------------------------------------- sections
def _s(default: Any, check: Any, static: bool, doc: str = "") -> Setting:
    return algo_setting(default, check, static=static, doc=doc)


ENV_SCHEMA: dict[str, Setting] = {
    "id": _s(None, string_or_none, True, "a preset id (plume-jax list)"),
    "config": _s(None, string_or_none, True, "the path of an env config YAML"),
    "overrides": _s({}, mapping_check, False, "passed to plume_jax.make / make_from_config"),
}

#: The ``algo.*`` settings every algorithm shares, whose meaning the loop
#: fixes (an algorithm's own: ``Algorithm.SETTINGS``; it may not redeclare these).
COMMON_ALGO: dict[str, Setting] = {
    "algorithm": _s("ppo", lambda name, value, grid=None: algorithm_class(value, name) and value,
                    True,
                    "a registered algorithm (plume_jax.train.algorithms.base.ALGORITHMS) or the "
                    "import path 'package.module:Class' of an Algorithm subclass"),
    "total_steps": _s(REQUIRED, count(low=1, high=10**13), True,
                      "env steps; rounded down to whole updates (training "
                      "says so)"),
    "num_envs": _s(64, count(low=1, high=1 << 20), True, "parallel envs"),
    "num_steps": _s(128, count(low=1, high=1 << 16), True, "env steps of each env per update"),
}

#: The ``network.*`` settings, declared on :class:`NetworkConfig`.
NETWORK_SCHEMA: dict[str, Setting] = declared_settings(NetworkConfig, None)

#: Values of ``run.distributed`` (see :mod:`plume_jax.train.distributed`).
DISTRIBUTED_MODES = ("auto", "cluster", "off")

RUN_SCHEMA: dict[str, Setting] = {
    "seed": _s(0, count(low=0, high=2**63 - 1), False, "training seed (every bit is used)"),
    "log_every": _s(10, count(low=1, high=10**9), True, "updates between progress lines"),
    "checkpoint_minutes": _s(5.0, optional(real(low=0.0, high=10**6, low_inclusive=False)), False,
                             "minutes between checkpoints to checkpoint/ (null: only at the "
                             "end)"),
    "checkpoint_every": _s(None, optional(count(low=1, high=10**9)), False,
                           "updates between checkpoints, each also kept in "
                           "checkpoints/update_N/ (null: none)"),
    "devices": _s("auto", devices_check, True,
                  "auto | N: shard the env batch (a sweep: its members) over N local devices; "
                  "auto: as many as divide the batch (several processes: all their devices)"),
    "lanes": _s(None, lanes_check, True,
                "null | N | [{from_update: U, lanes: N}, ...]: train this one run as lane 0 "
                "of a vmapped program of N identical copies (N times the compute; one device, "
                "one process), so that it reproduces bit for bit a sweep or tune member that "
                "trained in a program of N members; a list: a width schedule, updates "
                "[U_i, U_i+1) in programs of N_i copies (from_update 0 first, strictly "
                "increasing, each below the run's updates), as a tune trial trained through "
                "pruning rebuilds (tune's best_config.yaml sets it); null: the plain "
                "single-run program"),
    "distributed": _s("auto", choice(DISTRIBUTED_MODES), False,
                      "auto | cluster | off: join a multi-process run "
                      "(plume_jax.train.distributed); auto: when the launcher's environment "
                      "says so (SLURM srun, multi-host Cloud TPU, JAX_* variables)"),
    "init_from": _s(None, path_or_none, False,
                    "a trained policy to start from instead of a fresh network (a curriculum's "
                    "next stage): a policy folder, a run folder (its policy/) or a sweep folder "
                    "(each member takes the policy of its namesake, members/<name>/policy); "
                    "network weights and observation statistics carry over, the optimiser, "
                    "learning-rate schedule and env start fresh (plume_jax.train.warm_start); "
                    "null: a fresh network"),
    "tensorboard": _s(True, boolean(), False, "TensorBoard event files in tensorboard/"),
    "wandb_project": _s(None, string_or_none, False,
                        "a Weights & Biases project to log to (needs the wandb package); "
                        "null: no W&B"),
}

EVAL_SCHEMA: dict[str, Setting] = {
    "num_envs": _s(1000, count(low=1, high=1 << 20), True,
                   "greedy evaluation after training: episodes (one per env)"),
    "num_steps": _s(None, optional(count(low=1, high=10**7)), True,
                    "steps of each evaluation episode; null: the env's max_steps"),
    "seed": _s(1000003, count(low=0, high=2**63 - 1), True,
               "evaluation key seed (distinct from training seeds)"),
    "greedy": _s(True, boolean(), True,
                 "act on the policy's most likely action (false: sample)"),
    "every": _s(None, optional(count(low=1, high=10**9)), True,
                "updates between periodic evaluations during training (RL Zoo's "
                "EvalCallback): eval.periodic_episodes greedy episodes on eval.periodic_seed, "
                "rows in evaluations.jsonl, the best policy kept in best/ (belief_value_iteration: "
                "also its own evaluations on the posterior, algo.eval_searches, that pick the "
                "parameters it exports); null: none"),
    "periodic_episodes": _s(100, count(low=1, high=1 << 20), True,
                            "episodes (one per env) of each periodic evaluation"),
    "periodic_seed": _s(2000003, count(low=0, high=2**63 - 1), True,
                        "key seed of the periodic evaluations (distinct from eval.seed, so "
                        "the final evaluation does not score the policy it was chosen on)"),
}

SECTIONS = ("env", "algo", "network", "run", "eval")


def schemas(algorithm: Any = "ppo") -> dict[str, dict[str, Setting]]:
    """``section -> key -> Setting`` of a config whose ``algo.algorithm`` is
    ``algorithm``: its ``algo`` section is :data:`COMMON_ALGO` plus that
    algorithm's own ``SETTINGS`` and nothing else. ``ValidationError``
    when the algorithm redeclares a shared setting (the loop fixes their
    meaning)."""
    cls, own = settings_for(algorithm)
    clash = sorted(set(own) & set(COMMON_ALGO))
    if clash:
        raise ValidationError.for_parameter(
            "algo.algorithm", algorithm, f"an algorithm whose SETTINGS leave out the shared "
            f"settings {sorted(COMMON_ALGO)} ({cls.__name__} declares algo.{clash[0]})")
    return {"env": ENV_SCHEMA, "algo": {**COMMON_ALGO, **own}, "network": NETWORK_SCHEMA,
            "run": RUN_SCHEMA, "eval": EVAL_SCHEMA}


def _refuse_foreign(name: Any, values: Any, schema: Mapping[str, Setting]) -> None:
    """Refuse, as unknown ("did you mean"), an ``algo`` key that another
    registered algorithm declares, saying whose it is."""
    if not isinstance(values, Mapping):
        return
    for key, value in values.items():
        owners = readers(str(key)) if key not in schema else []
        if owners:
            raise unknown_setting(
                f"algo.{key}", value, schema,
                f"a setting of algo.algorithm {name!r} or a shared one (algo.{key} is a "
                f"setting of {' / '.join(repr(o) for o in owners)}: did you mean "
                f"algo.algorithm: {owners[0]}?)")


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """A validated training config. Build with :func:`train_config` or
    :func:`load_train_config`; ``to_dict()`` gives the resolved YAML form."""

    env: dict[str, Any]
    algo: dict[str, Any]
    network: NetworkConfig
    run: dict[str, Any]
    eval: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        net = {k: list(v) if isinstance(v, tuple) else v
               for k, v in dataclasses.asdict(self.network).items()}
        return {"env": copy.deepcopy(self.env), "algo": dict(self.algo), "network": net,
                "run": copy.deepcopy(self.run), "eval": dict(self.eval)}

    # -- derived sizes ------------------------------------------------------
    @property
    def steps_per_update(self) -> int:
        return self.algo["num_envs"] * self.algo["num_steps"]

    @property
    def num_updates(self) -> int:
        """``algo.total_steps`` in whole updates of :attr:`steps_per_update`
        env steps: the updates that fit (rounded down), at least one, and
        :meth:`steps_note` says so when that is not ``total_steps``.
        Rounded down, not up or to the nearest: every run and checkpoint
        written so far stores its update count, and every shipped config
        asks for a little more than a whole number of updates (3,000,000 =
        366.2 updates of 8,192), so any other rounding would make a resumed
        run, or a re-trained zoo config, one update longer than it was."""
        total, per = self.algo["total_steps"], self.steps_per_update
        return max(1, total // per)

    def steps_note(self) -> str | None:
        """A line saying how ``algo.total_steps`` was rounded to whole
        updates, or None when it is a whole number of them."""
        total, per, n = self.algo["total_steps"], self.steps_per_update, self.num_updates
        if total == n * per:
            return None
        return (f"algo.total_steps: {total:,} env steps are {total / per:.2f} updates of {per:,} "
                f"(num_envs x num_steps); training runs whole updates, {n:,} "
                f"update{'s' if n != 1 else ''} = {n * per:,} env steps (for {n + 1:,}, set "
                f"algo.total_steps to {(n + 1) * per:,})")

    def replace(self, **sections: dict[str, Any]) -> "TrainConfig":
        """A new validated config with some keys of some sections replaced,
        e.g. ``cfg.replace(algo={"total_steps": 1000})``."""
        data = self.to_dict()
        for section, values in sections.items():
            if section not in SECTIONS:
                raise ValidationError.for_parameter(section, values, f"one of {list(SECTIONS)}")
            data[section] = {**data[section], **values}
        return train_config(data)

    def make_env(self):
        """``(env, params)`` built from the env section (validated by ``make``)."""
        from plume_jax.envs.config_files import make_from_config
        from plume_jax.envs.presets import make

        overrides = dict(self.env.get("overrides") or {})
        if self.env.get("config"):
            return make_from_config(self.env["config"], **overrides)
        return make(self.env["id"], **overrides)


def train_config(data: Mapping[str, Any], *, base_dir: str | pathlib.Path | None = None
                 ) -> TrainConfig:
    """Validate a config mapping (the YAML structure above).

    ``base_dir`` resolves a relative ``env.config`` path (the folder of the
    YAML file it came from).
    """
    if not isinstance(data, Mapping):
        raise ValidationError.for_parameter("config", data, "a mapping with sections "
                                            f"{list(SECTIONS)}")
    unknown = sorted((k for k in data if k not in SECTIONS), key=str)
    if unknown:
        raise unknown_setting(str(unknown[0]), data[unknown[0]], SECTIONS, "a config section")
    algo_values = data.get("algo")
    name = algo_values.get("algorithm", COMMON_ALGO["algorithm"].default) \
        if isinstance(algo_values, Mapping) else COMMON_ALGO["algorithm"].default
    schema = schemas(name)
    _refuse_foreign(name, algo_values, schema["algo"])
    sections = {s: resolve_keys(s, schema[s], data.get(s), what=f"a known {s} setting",
                                check_defaults=False) for s in SECTIONS}
    env = sections["env"]
    if (env["id"] is None) == (env["config"] is None):
        raise ValidationError.for_parameter(
            "env.id", env["id"], "exactly one of env.id (a preset id) and env.config (a path)")
    if env["config"] is not None and base_dir is not None:
        path = pathlib.Path(env["config"])
        if not path.is_absolute() and not path.exists():
            env["config"] = str(pathlib.Path(base_dir) / path)
    algo = sections["algo"]
    if algo["total_steps"] < algo["num_envs"] * algo["num_steps"]:
        raise ValidationError.for_parameter(
            "algo.total_steps", algo["total_steps"],
            f"at least num_envs * num_steps = {algo['num_envs'] * algo['num_steps']} "
            "(one update)")
    config = TrainConfig(env=env, algo=algo, network=NetworkConfig(**sections["network"]),
                         run=sections["run"], eval=sections["eval"])
    _check_lane_schedule(config)
    algorithm_class(name).check_config(config)
    return config


def _check_lane_schedule(config: TrainConfig) -> None:
    """A ``run.lanes`` width schedule switches width only at updates the
    run trains: every ``from_update`` below its number of updates."""
    lanes = config.run["lanes"]
    if isinstance(lanes, list) and lanes[-1]["from_update"] >= config.num_updates:
        raise ValidationError.for_parameter(
            "run.lanes", lanes, f"a width schedule whose from_update values are below the "
            f"run's {config.num_updates} updates (algo.total_steps // (num_envs * num_steps)); "
            f"entry {len(lanes) - 1} starts at update {lanes[-1]['from_update']}")


def read_yaml(path: str | os.PathLike, parameter: str = "--config") -> dict[str, Any]:
    """Read a YAML mapping (:func:`plume_jax.envs.config_files.read_yaml`:
    ``yaml.safe_load``, so a ``!!python/`` tag is refused); ``ValidationError``
    naming ``parameter`` and the file for a missing, unreadable or binary
    file, bad YAML or a document that is not a mapping."""
    from plume_jax.envs.config_files import read_yaml as read_yaml_document

    data = read_yaml_document(path, parameter)
    if not isinstance(data, Mapping):
        raise ValidationError.for_parameter(parameter, str(path),
                                            "a YAML file holding a mapping")
    return dict(data)


def apply_dotted(data: dict[str, Any], key: str, value: Any, where: str) -> None:
    """Set one setting of a raw (unvalidated) config mapping by its dotted
    name, in place:

    - ``SECTION.KEY`` (``algo.num_envs``, ``run.seed``,
      ``network.hidden_sizes``, ``env.id``);
    - ``env.overrides.NAME`` or ``env.NAME``: a ``plume_jax.make`` override
      (``env.sigma``);
    - ``env.overrides.SLOT.PARAM`` or ``env.SLOT.PARAM``: one parameter of a
      component slot (``env.reward.scale``).

    Unknown sections and keys are left for :func:`train_config` to name;
    ``where`` names the source in errors about the key's form.
    """
    if not isinstance(key, str):
        raise ValidationError.for_parameter(where, key, "a dotted name SECTION.KEY")
    parts = key.split(".")
    if len(parts) < 2 or not all(parts):
        raise ValidationError.for_parameter(
            where, key, "a dotted name SECTION.KEY (e.g. run.seed, "
            "env.overrides.sigma)")
    section = parts[0]
    if section == "env" and parts[1] not in ("id", "config") and not (
            parts[1] == "overrides" and len(parts) == 2):
        names = parts[2:] if parts[1] == "overrides" else parts[1:]
        if len(names) not in (1, 2):
            raise ValidationError.for_parameter(
                where, key, "env.overrides.NAME or env.overrides.SLOT.PARAM")
        env = data.setdefault("env", {})
        if not isinstance(env, dict):
            raise ValidationError.for_parameter("env", env, "a mapping")
        overrides = env.get("overrides") or {}
        if not isinstance(overrides, Mapping):
            raise ValidationError.for_parameter("env.overrides", overrides, "a mapping")
        overrides = dict(overrides)
        if len(names) == 1:
            overrides[names[0]] = copy.deepcopy(value)
        else:
            slot = overrides.get(names[0])
            slot = {"type": slot} if isinstance(slot, str) else dict(slot or {})
            slot[names[1]] = copy.deepcopy(value)
            overrides[names[0]] = slot
        env["overrides"] = overrides
        return
    if len(parts) != 2:
        raise ValidationError.for_parameter(
            where, key, "SECTION.KEY (e.g. run.seed), env.overrides.NAME or "
            "env.overrides.SLOT.PARAM")
    target = data.setdefault(section, {})
    if target is None:
        target = data[section] = {}
    if not isinstance(target, dict):
        raise ValidationError.for_parameter(section, target, "a mapping")
    target[parts[1]] = copy.deepcopy(value)


def with_overrides(data: Mapping[str, Any], overrides: Mapping[str, Any] | None,
                   where: str = "--set") -> dict[str, Any]:
    """A copy of a raw config mapping with dotted overrides applied (see
    :func:`apply_dotted`)."""
    out = copy.deepcopy(dict(data))
    for key, value in (overrides or {}).items():
        apply_dotted(out, key, value, where)
    return out


def load_train_config(path: str | os.PathLike, overrides: Mapping[str, Any] | None = None,
                      *, written: bool = False) -> TrainConfig:
    """Read and validate a training config YAML file, with optional dotted
    ``overrides`` (``{"run.seed": 1}``, see
    :func:`apply_dotted`) applied before validation. ``written``: the file
    is a run folder's resolved ``config.yaml`` (perhaps written by an
    earlier version: :func:`current_form` is applied first)."""
    data = read_yaml(path)
    data = with_overrides(current_form(data) if written else data, overrides)
    return train_config(data, base_dir=pathlib.Path(path).parent)


def dump_yaml(data: Any) -> str:
    """YAML text that :func:`read_yaml` reads back as ``data``
    (:class:`plume_jax.files.safe_io.YAMLDumper`)."""
    from plume_jax.files.safe_io import YAMLDumper

    return yaml.dump(data, Dumper=YAMLDumper, sort_keys=False, default_flow_style=None,
                     width=100)


def static_signature(config: TrainConfig) -> dict[str, Any]:
    """The settings compiled into the program (``section.key -> value``):
    sweep members that agree on all of them, and on the env's static
    structure, share one compiled program."""
    out = {}
    values = config.to_dict()
    for section, schema in schemas(config.algo["algorithm"]).items():
        if section in ("env", "eval"):
            continue
        for key, setting in schema.items():
            if setting.static:
                out[f"{section}.{key}"] = values[section][key]
    return out


#: Settings a resumed run may change: the budget, logging, checkpointing,
#: devices, lanes and processes, and the final evaluation. Everything else defines
#: the problem or the algorithm and must equal the checkpoint's.
RESUME_MAY_CHANGE = ("algo.total_steps", "run.log_every", "run.checkpoint_minutes",
                     "run.checkpoint_every", "run.devices", "run.lanes", "run.distributed",
                     "run.tensorboard",
                     "run.wandb_project", "eval.*")


def _flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, Mapping) and data:
        out: dict[str, Any] = {}
        for key, value in data.items():
            out.update(_flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(data, tuple):
        data = list(data)
    return {prefix: data}


def resume_differences(saved: Mapping[str, Any], config: TrainConfig
                       ) -> dict[str, tuple[Any, Any]]:
    """``name -> (saved value, new value)`` of the settings where ``config``
    differs from ``saved`` (a checkpoint's resolved config) in a way a resume
    may not change (see :data:`RESUME_MAY_CHANGE`), sorted by name; an unset
    value is ``"<unset>"``. A setting the checkpoint's config lacks (added to
    plume_jax after it was written) counts at its default, the behaviour
    every new setting's default keeps."""
    import json

    def may_change(name: str) -> bool:
        return any(name == k or (k.endswith(".*") and name.startswith(k[:-1]))
                   for k in RESUME_MAY_CHANGE)

    saved = current_form(saved)
    old = _flatten(json.loads(json.dumps(saved)))
    try:  # a setting added after the checkpoint was written: its default, as it trained
        filled = _flatten(json.loads(json.dumps(train_config(saved).to_dict())))
    except ValidationError:
        filled = {}
    old = {**{k: v for k, v in filled.items() if k not in old}, **old}
    new = _flatten(json.loads(json.dumps(config.to_dict())))
    return {k: (old.get(k, "<unset>"), new.get(k, "<unset>"))
            for k in sorted(set(old) | set(new))
            if not may_change(k) and old.get(k, "<unset>") != new.get(k, "<unset>")}


#: The ``algo`` keys plume_jax 0.1.x wrote into every resolved config,
#: whichever algorithm it named (beyond :data:`COMMON_ALGO`).
ALGO_KEYS_0_1 = (
    "update_epochs", "num_minibatches", "learning_rate", "anneal_lr", "gamma", "gae_lambda",
    "clip_eps", "clip_value", "ent_coef", "vf_coef", "max_grad_norm", "adam_eps",
    "normalize_obs", "normalize_advantages", "epsilon", "baseline_scale", "batch_size",
    "gd_steps", "memory_size", "epsilon_start", "epsilon_floor", "epsilon_decay",
    "target_update_every", "stop_p", "max_episode_steps", "symmetry_augment",
    "symmetry_average", "frozen_target", "eval_every", "eval_searches", "eval_seed")


def current_form(saved: Any) -> Any:
    """A config written by a run folder or checkpoint of an earlier version,
    in the form this version reads: the one place that knows the old forms.

    0.1.x wrote every algorithm's ``algo.*`` settings (:data:`ALGO_KEYS_0_1`)
    into every config, other algorithms' at their (enforced) defaults: those
    the config's algorithm does not declare are dropped; its
    ``belief_value_iteration`` ``algo.eval_every`` (0: never) becomes
    ``eval.every`` unless that is set. An ``algo``, ``network`` or ``run``
    setting added since is filled in at its default, the value it trained
    with. The rest is left for :func:`train_config`; a config that is not a
    mapping is returned as it is."""
    if not isinstance(saved, Mapping) or not isinstance(saved.get("algo"), Mapping):
        return saved  # type: ignore[return-value]
    data = copy.deepcopy(dict(saved))
    algo = data["algo"] = dict(data["algo"])
    try:
        own = schemas(algo.get("algorithm", COMMON_ALGO["algorithm"].default))["algo"]
    except ValidationError:
        return data  # an algorithm this version cannot import: train_config names it
    period = algo.get("eval_every")
    for key in [k for k in algo if k in ALGO_KEYS_0_1 and k not in own]:
        del algo[key]
    if algo.get("algorithm") == "belief_value_iteration" and isinstance(period, int):
        given = data.get("eval")
        section = dict(given) if isinstance(given, Mapping) else {}
        if section.get("every") is None:
            data["eval"] = {**section, "every": period or None}
    data = _with_new_settings(data, "algo", own)
    return _with_new_settings(_with_new_settings(data, "network", NETWORK_SCHEMA), "run",
                              RUN_SCHEMA)


def _with_new_settings(data: dict[str, Any], section: str, schema: Mapping[str, Setting]
                       ) -> dict[str, Any]:
    """``data`` with each ``schema`` setting its ``section`` lacks added at
    its default (lists for tuples, as YAML reads back), in the resolved
    order; a section that is absent or not a mapping is left as it is."""
    values = data.get(section)
    if not isinstance(values, Mapping):
        return data
    filled = {key: values[key] if key in values else
              list(s.default) if isinstance(s.default, tuple) else s.default
              for key, s in schema.items()}
    data[section] = {**filled, **values}  # an unknown key stays, for train_config to name
    return data
