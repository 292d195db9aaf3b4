"""An evaluation's run: a scenario and an agent planned into a
:class:`PlannedRun` (env built, agent built, settings checked, nothing run
yet: :func:`plan_run`), then executed as one vmapped rollout, or in batches
of envs when captured (:func:`execute_run`), into a report whose metrics
:mod:`plume_jax.evaluate.scenario_stats` computes.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import time
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp

from plume_jax.core.errors import ValidationError
from plume_jax.core.seeding import seed_key
from plume_jax.evaluate.scenario_file import check_episodes, validate_seed
from plume_jax.evaluate.scenario_stats import check_expectations, summarise
from plume_jax.settings import (
    plain,
)


@dataclasses.dataclass(frozen=True)
class AgentChoice:
    """An agent asked for instead of a scenario's own (``--agent``).

    Attributes:
        name: the registry name (``agents.registry``), e.g. ``"trained"``.
        label: what names the run in tables, files and baselines (default:
            ``name``); distinct labels let one agent run twice with different
            parameters (two trained policies).
        params: parameters given for it; for the scenario's own agent they
            are laid over the scenario's parameters.
    """

    name: str
    label: str = ""
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.label:
            object.__setattr__(self, "label", self.name)


@dataclasses.dataclass(frozen=True)
class PlannedRun:
    """One (scenario, agent) pair, built and checked, not yet run.

    Attributes:
        scenario: the validated scenario.
        label, agent_name, agent_params: the agent that runs it.
        expect: the expectations checked for this run ({} when skipped).
        expect_skipped: why the scenario's expectations are not checked
            (``None`` when they are, or when it has none).
        env, params, policy: the built env, its params and the agent.
        episodes, seed, num_steps: the run's size and seed.
        overrides: the settings laid over the preset.
        env_note: a warning that a trained policy runs on an env other than
            its training env (:func:`env_note`), or None.
        preset: the preset run when it is not the scenario's
            (``--env-from-run``), or None.
    """

    scenario: Mapping[str, Any]
    label: str
    agent_name: str
    agent_params: Mapping[str, Any]
    expect: Mapping[str, Any]
    expect_skipped: str | None
    env: Any
    params: Any
    policy: Any
    episodes: int
    seed: int
    num_steps: int
    overrides: Mapping[str, Any]
    env_note: str | None = None
    preset: str | None = None


def scenario_env(scenario: Mapping[str, Any]) -> tuple[Any, Any, dict[str, Any]]:
    """``(env, params, overrides)`` of a scenario (``max_steps`` applied)."""
    from plume_jax.envs.presets import make

    overrides = dict(scenario["env"]["overrides"])
    if scenario.get("max_steps") is not None:
        overrides["max_steps"] = scenario["max_steps"]
    env, params = make(scenario["env"]["preset"], **overrides)
    return env, params, overrides


#: Env settings a trained policy's evaluation is not warned about: the
#: reward (evaluation measures success and steps) and the episode budget
#: (a scenario's own ``max_steps``).
UNCOMPARED_SETTINGS = ("reward", "max_steps")


def training_env(agent_name: str, agent_params: Mapping[str, Any]) -> dict[str, Any] | None:
    """The settings of the env a trained policy was trained on, as its
    ``policy.json`` records them (``env``: the resolved settings, preset id
    included), for agent ``trained`` with a ``path`` or a zoo reference;
    ``None`` for other agents, or a policy folder without a readable
    ``policy.json`` recording them (building the agent reports a bad one).

    Raises:
        ValidationError: an unknown zoo entry.
    """
    from agents.zoo import is_zoo_reference, resolve
    from plume_jax.files.safe_io import load_json_file

    if is_zoo_reference(agent_name):
        folder = resolve(agent_name).policy_path
    elif agent_name == "trained" and isinstance(agent_params.get("path"), (str, os.PathLike)):
        folder = pathlib.Path(agent_params["path"])
    else:
        return None
    if not (folder / "policy.json").is_file():
        return None  # building the agent says what is wrong with the folder
    try:
        spec = load_json_file(folder / "policy.json", "path")
    except ValidationError:
        return None
    env = spec.get("env") if isinstance(spec, dict) else None
    return dict(env) if isinstance(env, dict) and env.get("id") else None


def env_differences(trained: Mapping[str, Any], used: Mapping[str, Any],
                    prefix: str = "") -> list[str]:
    """``"name: trained X, here Y"`` for each setting (dotted, e.g.
    ``plume.sigma``) that differs between two envs' settings, leaving out
    :data:`UNCOMPARED_SETTINGS`; a component of another ``type`` is one
    entry (its type), not a list of its parameters."""
    out = []
    for name in dict.fromkeys([*trained, *used]):
        if not prefix and name in UNCOMPARED_SETTINGS:
            continue
        a, b = plain(trained.get(name)), plain(used.get(name))
        if isinstance(a, Mapping) and isinstance(b, Mapping) and a.get("type") == b.get("type"):
            out += env_differences(a, b, f"{prefix}{name}.")
        elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b) \
                and all(isinstance(v, Mapping) for v in a + b):  # e.g. a composite's sensors
            for i, (x, y) in enumerate(zip(a, b)):
                part = str(x.get("name", i) if x.get("name") == y.get("name") else i)
                out += env_differences({part: x}, {part: y}, f"{prefix}{name}.")
        elif a != b:
            def shown(v: Any) -> Any:
                return v.get("type", v) if isinstance(v, Mapping) else v
            out.append(f"{prefix}{name}: trained {shown(a)!r}, here {shown(b)!r}")
    return out


def env_note(trained: Mapping[str, Any] | None, env: Any, label: str,
             protocol: str | None = None) -> str | None:
    """The warning for a trained policy evaluated on an env other than its
    own (:func:`env_differences`), or None. Under a fixed-start ``protocol``
    the scenario's env is the protocol's evaluation env on purpose, so the
    warning says that instead of offering ``--env-from-run``."""
    used = getattr(env, "settings", None)
    if not trained or not isinstance(used, Mapping):
        return None
    diffs = env_differences(_with_current_defaults(trained), used)
    if not diffs:
        return None
    limit = 3 if protocol else 4
    shown = "; ".join(diffs[:limit]) + (f"; and {len(diffs) - limit} more"
                                         if len(diffs) > limit else "")
    head = (f"agent {label!r} was trained on {trained['id']} with other settings than this "
            f"env ({shown})")
    if protocol:
        return (f"{head}; expected: protocol {protocol} evaluates on its scenario's env "
                "(docs/singh2023.md)")
    return f"{head}; --env-from-run evaluates it on its own training env"


def _with_current_defaults(trained: Mapping[str, Any]) -> Mapping[str, Any]:
    """``trained`` with each setting its record lacks (one added since the
    policy was trained) read as its preset's current value, so that a
    setting the training env could not have had is no difference unless
    this env moves it from that value."""
    try:
        from plume_jax.envs.presets import make

        current = make(str(trained["id"]))[0].settings
    except Exception:  # an id that is not a preset (today's or any): compare as recorded
        return trained

    def fill(record: Any, now: Any) -> Any:
        if not (isinstance(record, Mapping) and isinstance(now, Mapping)) \
                or record.get("type") != now.get("type"):
            return record
        return {**{k: v for k, v in now.items() if k not in record},
                **{k: fill(v, now.get(k)) for k, v in record.items()}}

    return fill(trained, current)


def check_policy_traces(env: Any, params: Any, policy: Any, name: str) -> None:
    """Trace one decision of a functional ``policy`` on the env's observation,
    abstractly (``jax.eval_shape``: nothing compiles or runs), and check the
    action's shape and kind — so an agent that cannot act on this env fails
    here, not while a rollout compiles after other runs.

    Raises:
        ValidationError: (parameter ``agent``) naming the agent and what failed.
    """
    key = jax.random.key(0)
    obs = jax.eval_shape(env.reset, key, params)[0]
    try:
        action = jax.eval_shape(lambda k, o: policy.act(policy.init(k), o, k)[0], key, obs)
    except (TypeError, ValueError, KeyError, IndexError, AttributeError) as error:
        raise ValidationError.for_parameter(
            "agent", name, f"an agent that can act on this env's observation {obs} "
            f"({type(error).__name__}: {' '.join(str(error).split())[:300]})") from None
    space = env.action_space(params)
    team = env.is_multi_agent
    expected = ((env.num_agents,) if team else ()) + tuple(space.shape)
    discrete = not hasattr(space, "low")
    if tuple(action.shape) != expected or (discrete and not jnp.issubdtype(action.dtype,
                                                                           jnp.integer)):
        raise ValidationError.for_parameter(
            "agent", name, f"an agent whose action fits the env's action space {space} "
            f"(shape {expected}{', integers' if discrete else ''}), not {action}")


def plan_run(scenario: Mapping[str, Any], agent: AgentChoice | None = None, *,
             episodes: int | None = None, seed: int | None = None,
             built_env: tuple[Any, Any, dict[str, Any]] | None = None,
             env_from_run: bool = False) -> PlannedRun:
    """Build the env and the agent of one run, so that every check (preset
    overrides, agent name and parameters, the agent against the env, a
    trained policy's or SB3 model's file) happens before anything runs.

    ``agent=None`` runs the scenario's own agent. An :class:`AgentChoice`
    with the scenario's agent name runs it with the scenario's parameters
    updated by the choice's; the scenario's ``expect`` is checked only when
    the result is the scenario's own agent and parameters (defaults
    included: ``include_noop=False`` given for ``random_walk`` is its own
    default). ``built_env``
    reuses ``scenario_env(scenario)`` across agents.

    A trained policy (``trained`` or ``zoo:<name>``) whose recorded training
    env differs from the scenario's in a setting that matters gets a
    warning in ``env_note`` (:func:`env_note`); ``env_from_run=True`` runs
    it on its own training env instead (the scenario's episodes and seed;
    its expectations are not checked there).

    Raises:
        ValidationError: from the env, the agent registry or the agent.
    """
    from plume_jax.core.agents_package import check_agents_package

    check_agents_package()
    from agents.registry import default_params, is_host_agent, make_agent

    env, params, overrides = built_env or scenario_env(scenario)
    own = scenario["agent"]
    if agent is None:
        agent = AgentChoice(own["name"])
    agent_params = dict(agent.params)
    if agent.name == own["name"]:
        agent_params = {**own["params"], **agent_params}
    trained = training_env(agent.name, agent_params)
    if env_from_run:
        if trained is None:
            raise ValidationError.for_parameter(
                "--env-from-run", agent.label, "trained agents only (trained with path=..., or "
                "zoo:<name>) whose policy.json records the env they were trained on")
        from plume_jax.envs.presets import make

        overrides = {k: v for k, v in trained.items() if k != "id"}
        env, params = make(trained["id"], **overrides)
    defaults = default_params(agent.name)
    is_own = agent.name == own["name"] and \
        {**defaults, **agent_params} == {**defaults, **own["params"]}
    skipped = None
    if scenario["expect"] and not is_own:
        skipped = (f"the scenario's expectations are for agent {own['name']!r}"
                   + (f" with parameters {own['params']}" if own["params"] else "")
                   + f", not {agent.name!r}"
                   + (f" with parameters {agent_params}" if agent_params else ""))
    elif scenario["expect"] and env_from_run:
        is_own = False
        skipped = ("the scenario's expectations are for its own env; --env-from-run ran the "
                   f"policy's training env ({trained['id']})")  # type: ignore[index]
    if episodes is not None:
        check_episodes("episodes", episodes, None)
    if scenario.get("protocol"):
        from plume_jax.evaluate import singh_protocol

        singh_protocol.check_env(env, params, scenario["protocol"])
        if is_host_agent(agent.name):
            raise ValidationError.for_parameter(
                "agent", agent.name, f"a functional agent (protocol {scenario['protocol']} "
                "runs its own jitted rollout)")
        if episodes is None:
            episodes = singh_protocol.EPISODES
        else:  # a quick look: that many of the fixed starts, evenly spread
            singh_protocol.subset(episodes)
    if scenario.get("normalisation", "saved") != "saved" and not scenario.get("protocol"):
        raise ValidationError.for_parameter(
            "normalisation", scenario["normalisation"], "'saved' without a protocol (online "
            "normalisation is the singh240 protocol's)")
    policy = make_agent(agent.name, env, **agent_params)
    if scenario.get("protocol"):
        singh_protocol.check_options(scenario["protocol"], scenario.get("normalisation", "saved"),
                                     policy)
    if not is_host_agent(agent.name):
        check_policy_traces(env, params, policy, agent.name)
    return PlannedRun(
        scenario=scenario, label=agent.label, agent_name=agent.name, agent_params=agent_params,
        expect=dict(scenario["expect"]) if is_own else {}, expect_skipped=skipped,
        env=env, params=params, policy=policy,
        episodes=episodes or scenario["episodes"],
        seed=validate_seed(scenario["seed"] if seed is None else seed),
        num_steps=int(params.max_steps), overrides=overrides,
        env_note=None if env_from_run else env_note(trained, env, agent.label,
                                                    scenario.get("protocol")),
        preset=trained["id"] if env_from_run else None)  # type: ignore[index]


class _BatchProgress:
    """``progress`` of a run evaluated in batches of envs: the envs of the
    batches before (``base``) plus a batch's finished episodes less the
    ``skip`` envs it shares with the batch before (already counted; the
    count is then a lower bound until the batch ends, never above the
    episodes run, never going back). One object per run, hashable by
    identity (a static argument of the rollout)."""

    def __init__(self, progress: Callable[[int, int], None]):
        self.progress, self.base, self.skip = progress, 0, 0

    def __call__(self, steps: Any, finished: Any) -> None:
        self.progress(steps, self.base + max(0, int(finished) - self.skip))


def _captured_rollout(run: PlannedRun, key: jax.Array,
                      progress: Callable[[int, int], None] | None,
                      capture: Any) -> tuple[Any, float, float]:
    """The rollout of ``run`` in batches of ``capture.batch`` envs, each
    drawing the keys it has in the whole run (the results are the whole
    rollout's), each batch's transitions handed to ``capture.add`` before
    the next runs. Returns ``(result, compile seconds, run seconds)``."""
    from agents.registry import is_host_agent
    from plume_jax.evaluate.rollout import host_rollout, join_results, rollout

    env, params, n = run.env, run.params, run.episodes
    size = max(1, min(n, int(capture.batch)))
    batch_progress = None if progress is None else _BatchProgress(progress)
    host = is_host_agent(run.agent_name)
    compile_s = run_s = 0.0
    if not host:
        t0 = time.perf_counter()
        compiled = rollout.lower(env, params, run.policy, key, size, run.num_steps,
                                 until_done=True, progress=batch_progress, capture=True,
                                 total_envs=n, env_offset=jnp.int32(0)).compile()
        compile_s = time.perf_counter() - t0
    parts = []
    for start in range(0, n, size):
        offset = min(start, n - size)  # the last batch: the run's last `size` envs
        if batch_progress is not None:
            batch_progress.base, batch_progress.skip = start, start - offset
        t0 = time.perf_counter()
        if host:
            result = host_rollout(env, params, run.policy, key, size, run.num_steps,
                                  until_done=True, progress=batch_progress, capture=True,
                                  total_envs=n, env_offset=offset)
        else:
            result = compiled(params, key, env_offset=jnp.int32(offset))
        result = jax.block_until_ready(result)
        run_s += time.perf_counter() - t0
        capture.add(result, offset, start - offset)
        parts.append((jax.device_get(result.replace(steps=None)), start - offset))
    return join_results(parts), compile_s, run_s


def execute_run(run: PlannedRun,
                progress: Callable[[int, int], None] | None = None,
                capture: Any = None) -> dict[str, Any]:
    """Run a planned (scenario, agent) pair: one rollout of ``run.episodes``
    seeded episodes that stops when all have ended.

    ``progress(steps_done, episodes_finished)`` is called on the host as the
    rollout advances (see :func:`plume_jax.evaluate.rollout.rollout`).

    Returns a JSON-serialisable report: scenario, agent, metrics,
    expectations (checked, failed or skipped, and why), timing; plus
    ``"_rollout"``, ``"_env"``, ``"_params"`` and ``"_scenario"`` (not
    serialised) for plotting and captures. ``capture`` (a
    :class:`plume_jax.evaluate.capture.RunCapture`) runs the episodes in
    batches of ``capture.batch`` envs with the same results, handing each
    batch's transitions to ``capture.add`` (:func:`_captured_rollout`).
    """
    from plume_jax.core.agents_package import check_agents_package

    check_agents_package()
    from agents.registry import is_host_agent
    from plume_jax.evaluate.rollout import host_rollout, rollout

    env, params, n = run.env, run.params, run.episodes
    key = seed_key(run.seed)
    t0 = time.perf_counter()
    protocol: dict[str, Any] | None = None
    if run.scenario.get("protocol") and capture is not None:
        raise ValidationError.for_parameter(
            "--capture", "a capture folder", f"no capture with protocol "
            f"{run.scenario['protocol']} (scenario {run.scenario['name']!r})")
    if run.scenario.get("protocol"):
        from plume_jax.evaluate import singh_protocol

        result, protocol = singh_protocol.run(
            env, params, run.policy, key, run.seed, run.num_steps, episodes=n,
            protocol=run.scenario["protocol"],
            normalisation=run.scenario.get("normalisation", "saved"))
        protocol["paper_best"] = singh_protocol.paper_best(run.preset
                                                           or run.scenario["env"]["preset"])
        compile_s, run_s = 0.0, time.perf_counter() - t0
    elif capture is not None:
        result, compile_s, run_s = _captured_rollout(run, key, progress, capture)
    elif is_host_agent(run.agent_name):
        compile_s = 0.0
        result = jax.block_until_ready(host_rollout(env, params, run.policy, key, n,
                                                    run.num_steps, until_done=True,
                                                    progress=progress))
        run_s = time.perf_counter() - t0
    else:
        compiled = rollout.lower(env, params, run.policy, key, n, run.num_steps,
                                 until_done=True, progress=progress).compile()
        compile_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        result = jax.block_until_ready(compiled(params, key))
        run_s = time.perf_counter() - t0

    team = env.is_multi_agent
    metrics = summarise(result, float(params.goal_radius), team=team)
    if team:
        metrics["num_agents"] = env.num_agents
    if protocol is not None:
        metrics["protocol"] = protocol
    metrics["env_steps_per_second"] = n * int(result.steps_run) / run_s
    metrics["episodes_per_second"] = n / run_s
    failures = check_expectations(metrics, run.expect)
    if run.expect_skipped:
        expectations = {"status": "skipped", "reason": run.expect_skipped}
    elif not run.expect:
        expectations = {"status": "none", "reason": "the scenario sets no expectations"}
    else:
        expectations = {"status": "failed" if failures else "passed", "reason": ""}
    return {
        "scenario": run.scenario["name"],
        "preset": run.preset or run.scenario["env"]["preset"],
        "overrides": dict(run.overrides),
        "agent": {"name": run.agent_name, "label": run.label, "params": dict(run.agent_params)},
        "seed": run.seed,
        "max_steps": run.num_steps,
        "metrics": metrics,
        "expect": dict(run.scenario["expect"]),
        "expectations": expectations,
        "failures": failures,
        "timing": {"compile_seconds": compile_s, "run_seconds": run_s},
        "_rollout": result, "_env": env, "_params": params, "_scenario": run.scenario,
    }


def run_scenario(scenario: Mapping[str, Any], *, agent: str | None = None,
                 agent_params: Mapping[str, Any] | None = None, episodes: int | None = None,
                 seed: int | None = None) -> dict[str, Any]:
    """Plan and run one scenario (optionally with another agent / size /
    seed); see :func:`plan_run` and :func:`execute_run`."""
    choice = None if agent is None else AgentChoice(agent, params=dict(agent_params or {}))
    return execute_run(plan_run(scenario, choice, episodes=episodes, seed=seed))
