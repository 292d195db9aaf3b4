"""Robustness: the board's agents on plumes they were not trained on.

For a family's robustness preset (:attr:`Family.robustness_preset`) each
agent runs the preset as it is (``nominal``) and under variations, one axis
at a time (:func:`variations`):

- **source strength** 50 % and 200 % (the filament's puff mass; the Gaussian
  plume has a unit peak and no strength setting: not applicable);
- **plume scale** 50 % and 200 % (the Gaussian's sigma; the filament's puff
  radius and growth rate together);
- **wind** half and 1.5 times the speed, and the mean direction turned by
  30 degrees (filament; the Gaussian plume has no wind);
- **sensor noise**: Gaussian noise added to every odour reading (the
  ``noise`` sensor wrapping the preset's concentration sensor; the
  observation keeps its labels, so trained policies still apply);
- **start cell**: a per-start-cell success map — episodes from fixed start
  cells on a lattice over the whole domain (:func:`start_cell_map`).

Every variation of one static structure (all but sensor noise change only
dynamic parameters) runs as ONE program: the rollout of
:func:`plume_jax.evaluate.rollout.rollout` vmapped over the variations'
params, with the same key, so each variation sees the same episodes
(common random numbers) and each agent compiles once per structure.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from plume_jax.core.errors import ValidationError
from plume_jax.scoreboard.board import ROW_METRICS, reason_of
from plume_jax.scoreboard.contenders import Contender
from plume_jax.scoreboard.protocol import Protocol


@dataclasses.dataclass(frozen=True)
class Variation:
    """One column of the robustness table.

    Attributes:
        axis: ``nominal``, ``source strength``, ``plume scale``, ``wind`` or
            ``sensor noise``.
        level: what changed, e.g. ``"50 %"``, ``"+30°"``, ``"std 0.01"``.
        overrides: settings for ``plume_jax.make`` (``{}``: the preset).
        not_applicable: why this axis does not apply to the preset (then
            ``overrides`` is unused).
    """

    axis: str
    level: str
    overrides: dict[str, Any]
    not_applicable: str | None = None


def noisy_sensor(sensor: dict[str, Any], std: float) -> dict[str, Any]:
    """The preset's sensor settings with every concentration reading wrapped
    in a ``noise`` sensor of standard deviation ``std`` (a composite
    sensor's other parts, e.g. wind, are left as they are)."""
    if sensor.get("type") == "composite":
        out = copy.deepcopy(sensor)
        out["sensors"] = [noisy_sensor(part, std) for part in sensor["sensors"]]
        return out
    if sensor.get("type", "concentration") == "concentration":
        inner = {k: v for k, v in sensor.items() if k != "name"}
        wrapped = {"type": "noise", "std": std, "sensor": inner}
        return {**wrapped, "name": sensor["name"]} if "name" in sensor else wrapped
    return copy.deepcopy(sensor)


def variations(preset: str) -> list[Variation]:
    """The columns of the robustness table of ``preset`` (nominal first);
    axes that do not apply carry the reason."""
    from plume_jax.envs.presets import PRESETS, make

    settings = PRESETS[preset]
    plume = settings["plume"]
    out = [Variation("nominal", "preset", {})]
    if plume["type"] == "gaussian":
        sigma = float(plume.get("sigma", 20.0))
        out.append(Variation("source strength", "50–200 %", {}, not_applicable=(
            "the Gaussian plume's peak concentration is 1 by construction; it has no strength "
            "setting")))
        out += [Variation("plume scale", f"{int(f * 100)} %", {"sigma": sigma * f})
                for f in (0.5, 2.0)]
        out.append(Variation("wind", "speed, direction", {}, not_applicable=(
            "a static, windless plume: its concentration does not depend on wind")))
        noise_levels = (0.001, 0.01)
    elif plume["type"] == "filament":
        defaults = make(preset)[1].plume
        mass, radius, growth = (float(getattr(defaults, k)) for k in
                                ("puff_mass", "puff_radius", "growth"))
        speed, direction = float(defaults.wind_speed), float(defaults.wind_direction)
        out += [Variation("source strength", f"{int(f * 100)} %", {"puff_mass": mass * f})
                for f in (0.5, 2.0)]
        out += [Variation("plume scale", f"{int(f * 100)} %",
                          {"puff_radius": radius * f, "growth": growth * f}) for f in (0.5, 2.0)]
        out += [Variation("wind", f"speed {int(f * 100)} %", {"wind_speed": speed * f})
                for f in (0.5, 1.5)]
        out.append(Variation("wind", "direction +30°",
                             {"wind_direction": direction + math.radians(30.0)}))
        noise_levels = (0.01, 0.05)
    else:
        return out
    out += [Variation("sensor noise", f"std {s:g}",
                      {"sensor": noisy_sensor(settings["sensor"], s)}) for s in noise_levels]
    return out


def _vmapped_rollout(env: Any, policy: Any, episodes: int, num_steps: int) -> Any:
    """A jitted ``f(params_batch, key) -> RolloutResult`` whose fields carry a
    leading variation axis."""
    from plume_jax.evaluate.rollout import rollout

    def one(params, key):
        return rollout(env, params, policy, key, episodes, num_steps, until_done=True,
                       num_tracked=1)

    return jax.jit(jax.vmap(one, in_axes=(0, None)))


def _stack(params_list: list[Any]) -> Any:
    return jax.tree.map(lambda *xs: jnp.stack([jnp.asarray(x) for x in xs]), *params_list)


def _slice(result: Any, i: int) -> Any:
    return jax.tree.map(lambda x: x[i], result)


def run_robustness(preset: str, family: str, contenders: list[Contender],
                   protocol: Protocol, progress: Any = None) -> list[dict[str, Any]]:
    """A row per (contender, variation): the variation's metrics, or why it
    does not apply (the axis, or the agent on that env)."""
    from plume_jax.envs.presets import make
    from plume_jax.evaluate.scenario import check_policy_traces, summarise
    from plume_jax.core.seeding import seed_key

    columns = variations(preset)
    groups: dict[Any, list[tuple[int, Any]]] = {}  # first env of a structure -> columns
    first: dict[Any, Any] = {}
    for index, column in enumerate(columns):
        if column.not_applicable is None:
            env, params = make(preset, **column.overrides)
            env = first.setdefault(env.structure, env)
            groups.setdefault(env, []).append((index, params))
    rows = []
    for contender in contenders:
        found: dict[int, dict[str, Any]] = {}
        for env, members in groups.items():
            base = {"family": family, "preset": preset, "label": contender.label,
                    "kind": contender.kind}
            try:
                if contender.host:
                    raise _host_refused()
                policy = contender.build(env)
                check_policy_traces(env, members[0][1], policy, contender.label)
            except ValidationError as error:
                for index, _ in members:
                    found[index] = {**base, "status": "not applicable",
                                     "reason": reason_of(error)}
                continue
            if progress is not None:
                progress(f"robustness {preset} / {contender.label} "
                         f"({', '.join(columns[i].level for i, _ in members)})")
            num_steps = int(members[0][1].max_steps)
            run = _vmapped_rollout(env, policy, protocol.robustness_episodes, num_steps)
            result = jax.block_until_ready(run(_stack([p for _, p in members]),
                                               seed_key(protocol.seed)))
            for i, (index, params) in enumerate(members):
                metrics = summarise(_slice(result, i), float(params.goal_radius),
                                    team=env.is_multi_agent)
                found[index] = {**base, "status": "ok",
                                 "metrics": {k: metrics.get(k) for k in ROW_METRICS}}
        for index, column in enumerate(columns):
            cell = found.get(index) or {
                "family": family, "preset": preset, "label": contender.label,
                "kind": contender.kind, "status": "not applicable",
                "reason": column.not_applicable}
            rows.append({**cell, "axis": column.axis, "level": column.level})
    return rows


def _host_refused() -> Exception:
    from plume_jax.core.errors import ValidationError

    return ValidationError.for_parameter(
        "agent", "sb3", "a functional policy (host-side agents such as SB3 models run on the "
        "main board only; the robustness runs vmap the rollout)")


def _lattice(size: int, stride: int) -> np.ndarray:
    """Cell centres of a lattice with spacing ``stride`` over ``size`` cells."""
    return np.arange(stride // 2, size, stride, dtype=np.float32)


def start_cell_map(preset: str, contender: Contender, protocol: Protocol
                   ) -> dict[str, Any]:
    """Success per start cell: ``protocol.map_episodes`` episodes from each
    cell of a lattice every ``protocol.map_stride`` cells (start heading
    west, against the preset's mean wind), as one vmapped program.

    Returns:
        ``{"label", "xs", "ys", "success": [[rate | None]] (rows = ys),
        "episodes_per_cell", "heading"}`` (``None`` for cells inside the goal
        region), or ``{"label", "status": "not applicable", "reason"}``.
    """
    from plume_jax.envs.presets import PRESETS, make
    from plume_jax.evaluate.scenario import check_policy_traces
    from plume_jax.core.seeding import seed_key

    _, nominal = make(preset)
    width, height = (int(v) for v in PRESETS[preset]["grid_size"])
    source = np.asarray(nominal.plume.source, np.float32)
    radius = float(nominal.goal_radius)
    xs, ys = _lattice(width, protocol.map_stride), _lattice(height, protocol.map_stride)
    cells = [(x, y) for y in ys for x in xs if math.dist((x, y), source) > radius]
    heading = math.pi
    env, params = make(preset, start={"type": "fixed", "position": list(cells[0]),
                                                "heading": heading})
    try:
        if contender.host:
            raise _host_refused()
        policy = contender.build(env)
        check_policy_traces(env, params, policy, contender.label)
    except ValidationError as error:
        return {"label": contender.label, "status": "not applicable", "reason": reason_of(error)}
    batch = [params.replace(start=params.start.replace(
        position=jnp.asarray(cell, jnp.float32))) for cell in cells]
    run = _vmapped_rollout(env, policy, protocol.map_episodes, int(params.max_steps))
    result = jax.block_until_ready(run(_stack(batch), seed_key(protocol.seed)))
    rates = np.asarray(result.success).mean(axis=1)
    by_cell = {cell: float(rate) for cell, rate in zip(cells, rates)}
    grid = [[by_cell.get((x, y)) for x in xs] for y in ys]
    return {"label": contender.label, "status": "ok", "xs": xs.tolist(), "ys": ys.tolist(),
            "success": grid, "episodes_per_cell": protocol.map_episodes, "heading": heading}
