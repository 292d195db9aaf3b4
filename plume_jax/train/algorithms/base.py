"""The training-algorithm interface and the table of algorithms (layer 5).

A training algorithm is a class derived from :class:`Algorithm`, as a plume
is a class derived from ``Plume``: it says what it provides, the run driver
(:mod:`plume_jax.train.trainer` for one run, :mod:`plume_jax.train.sweep`
for many) does the rest — chunking, progress, logging, checkpoints, resume,
run folders, sweeps over members, policy export and evaluation.

What an algorithm provides:

- ``name`` (the value of ``algo.algorithm``) and ``SETTINGS``: the ``algo.*``
  settings it reads beyond :data:`COMMON_SETTINGS`, each declared once as a
  :class:`plume_jax.settings.Setting` (default, checker, static or dynamic,
  one line of doc) — made with :func:`algo_setting`. A setting declared by
  several algorithms is one declaration shared between them.
  Every ``algo.*`` setting of every registered algorithm appears in a
  resolved config; one the chosen algorithm does not read must keep its
  default (else ``ValidationError`` naming it), so that no setting is ever
  silently ignored.
- :meth:`Algorithm.from_config`: build it for a validated config and env
  (check everything the env or config must satisfy here, with
  ``ValidationError``, before anything is compiled);
- :meth:`Algorithm.hparams`: its *dynamic* settings as a pytree of array
  leaves (a sweep ``vmap``\\ s members that differ only in them);
- :meth:`Algorithm.init`: ``(key, hp, env_params) -> runner``, a pytree that
  carries everything from one update to the next and has an ``update``
  field (i32[], updates done);
- :meth:`Algorithm.update`: one update, ``(runner, hp, env_params) ->
  (runner, metrics)`` with a dict of scalar metrics that holds at least
  ``update`` and ``env_steps``;
- :meth:`Algorithm.policy`: the trained policy as ``(spec, arrays)``, the
  exported form ``agents.trained`` loads.

:meth:`Algorithm.run` (many updates in one ``lax.scan``, a dynamic count
of them, ``vmap`` over sweep members) is provided by the base.

The table :data:`ALGORITHMS` names the registered algorithms (``name ->
'module:Class'``, imported when first needed). ``algo.algorithm`` may also
be the import path ``'package.module:Class'`` of an algorithm defined
outside plume_jax: that is how a new algorithm is tried before it is
registered (docs/training.md, "Adding an algorithm").
"""

from __future__ import annotations

import abc
import functools
import importlib
import inspect
import re
from collections.abc import Mapping
from typing import Any, Callable, ClassVar

import jax
import jax.numpy as jnp

from plume_jax.core.errors import ValidationError, bounded_text
from plume_jax.settings import Checker, Setting
from plume_jax.train.members import vmap_members

#: ``algo.algorithm`` value -> ``'module:Class'`` of every registered algorithm.
ALGORITHMS: dict[str, str] = {
    "ppo": "plume_jax.train.algorithms.ppo:PPO",
    "lookahead_vi": "plume_jax.train.algorithms.lookahead:LookaheadVI",
    "belief_value_iteration": "plume_jax.train.algorithms.value_iteration:BeliefValueIteration",
}

#: ``package.module:Class`` (identifiers only).
_IMPORT_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:"
                          r"[A-Za-z_][A-Za-z0-9_]*$")


def algo_setting(default: Any, check: Checker, *, static: bool, doc: str = "") -> Setting:
    """One ``algo.*`` setting, checked by a :mod:`plume_jax.settings` checker
    (``check(name, value, grid) -> normalised value``, the checkers of
    component and scenario settings: ``real``, ``count``, ``boolean``,
    ``choice``, ``optional(...)``, ...; ``grid`` is ``None`` here).
    ``static`` settings are compiled into the program (sweep members that
    differ in them run as separate programs)."""
    return Setting(default=default, check=check, static=static, doc=doc)


class Algorithm(abc.ABC):
    """Base of every training algorithm (module docstring).

    Attributes every instance sets (read by the driver and the export):
        env: the env it trains on (static).
        num_updates: the updates of the whole run.
        steps_per_update: env steps per update (progress, metrics).
        discrete, action_dim, obs_dim, num_agents, multi_agent: the spaces
            of the policy (one agent's).
        mesh: the device mesh the env batch is sharded on, or None.
    """

    #: ``algo.algorithm`` of this algorithm.
    name: ClassVar[str] = ""
    #: ``algo.*`` settings it reads beyond :data:`COMMON_SETTINGS`.
    SETTINGS: ClassVar[Mapping[str, Setting]] = {}
    #: whether a sweep may ``vmap`` several members of it in one program.
    sweepable: ClassVar[bool] = True
    #: whether one run may shard its env batch (``algo.num_envs``) over devices.
    shards_env_batch: ClassVar[bool] = False

    env: Any
    num_updates: int
    steps_per_update: int
    discrete: bool = True
    action_dim: int = 0
    obs_dim: int = 0
    num_agents: int = 1
    multi_agent: bool = False
    mesh: Any = None

    # ------------------------------------------------------------ building
    @classmethod
    @abc.abstractmethod
    def from_config(cls, config: Any, env: Any, env_params: Any, mesh: Any = None
                    ) -> "Algorithm":
        """The algorithm for a validated ``TrainConfig`` on ``env``;
        ``ValidationError`` for anything it cannot train, before compiling."""

    @abc.abstractmethod
    def hparams(self, config: Any, env_params: Any) -> Any:
        """The dynamic settings as a pytree of array leaves."""

    # ------------------------------------------------------------ training
    @abc.abstractmethod
    def init(self, key: jax.Array, hp: Any, env_params: Any) -> Any:
        """A fresh runner (a pytree with an ``update`` i32[] field)."""

    @abc.abstractmethod
    def update(self, runner: Any, hp: Any, env_params: Any) -> tuple[Any, dict[str, Any]]:
        """One update: ``(runner', metrics)`` (scalars; ``update`` and
        ``env_steps`` among them)."""

    def run(self, runner: Any, hp: Any, env_params: Any, num_updates: int,
            callback: Callable | None = None, log_every: int = 1, batched: bool = False,
            count: Any = None) -> tuple[Any, dict[str, Any]]:
        """``num_updates`` updates in one ``lax.scan`` (jit with
        ``num_updates`` static); with ``batched`` every argument has a
        leading member axis (``env_params``: except its
        :class:`~plume_jax.train.members.Shared` leaves, which every
        member shares) and :meth:`update` is ``vmap``\\ ped over it.
        ``count`` (i32[], may be traced) runs only the first ``count``
        updates; ``callback(metrics)`` gets every ``log_every``-th update's
        metrics on the host (see :func:`scan_updates`)."""
        if batched and not self.sweepable:
            raise ValidationError.for_parameter(
                "algo.algorithm", self.name, "an algorithm whose members can run together "
                f"(sweepable) for a sweep; {self.name!r} trains one run at a time")
        if batched:
            def step(r: Any) -> tuple[Any, dict[str, Any]]:
                return vmap_members(self.batched_update, r, hp, env_params)
        else:
            def step(r: Any) -> tuple[Any, dict[str, Any]]:
                return self.update(r, hp, env_params)
        return scan_updates(step, runner,
                            num_updates=num_updates, last=self.num_updates, callback=callback,
                            log_every=log_every, batched=batched, count=count)

    def batched_update(self, runner: Any, hp: Any, env_params: Any) -> tuple[Any, dict]:
        """The update :meth:`run` ``vmap``\\ s over sweep members (default:
        :meth:`update`)."""
        return self.update(runner, hp, env_params)

    # ------------------------------------------------------------ export
    @abc.abstractmethod
    def policy(self, runner: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        """``(spec, arrays)`` of the trained policy (``agents.trained``'s
        format; the arrays may keep a leading member axis of a batched
        runner). The driver adds the env settings and the budget."""


def scan_updates(update: Callable, runner: Any, *, num_updates: int, last: int,
                 callback: Callable | None, log_every: int, batched: bool = False,
                 count: Any = None):
    """``update(runner) -> (runner, metrics)`` applied ``num_updates`` times in
    one ``lax.scan``: the loop of :meth:`Algorithm.run` (see there for
    ``callback``, ``log_every`` and ``count``), shared by every training algorithm.
    ``last`` is the run's final update number (its metrics always reach the
    callback); with ``batched`` the runner's update count has a leading axis."""

    def body(r, _):
        r, m = update(r)
        if callback is not None:
            u = r.update[0] if batched else r.update
            jax.lax.cond((u % log_every == 0) | (u == last),
                         lambda: jax.debug.callback(callback, m), lambda: None)
        return r, m

    if count is None:
        return jax.lax.scan(body, runner, None, length=num_updates)
    n = jnp.asarray(count, jnp.int32)

    def maybe(r, i):  # updates past ``count`` leave the runner as it is
        return jax.lax.cond(i < n, lambda: body(r, None), lambda: (r, filler))

    shapes = jax.eval_shape(lambda r: body(r, None)[1], runner)
    filler = jax.tree.map(lambda x: jnp.full(x.shape, jnp.nan, x.dtype)
                          if jnp.issubdtype(x.dtype, jnp.floating)
                          else jnp.zeros(x.shape, x.dtype), shapes)
    return jax.lax.scan(maybe, runner, jnp.arange(num_updates))


# ------------------------------------------------------------------ the table
def is_import_path(name: Any) -> bool:
    """Whether ``name`` has the form ``package.module:Class``."""
    return isinstance(name, str) and bool(_IMPORT_PATH.match(name))


@functools.lru_cache(maxsize=None)
def _import(path: str) -> type:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def algorithm_class(name: Any, parameter: str = "algo.algorithm") -> type[Algorithm]:
    """The class of ``name``: a key of :data:`ALGORITHMS`, or the import
    path ``'package.module:Class'`` of an :class:`Algorithm` subclass.
    ``ValidationError`` naming ``parameter`` otherwise."""
    allowed = (f"one of {sorted(ALGORITHMS)} or the import path 'package.module:Class' of an "
               "Algorithm subclass (plume_jax.train.algorithms.base)")
    if isinstance(name, str) and name in ALGORITHMS:
        return _import(ALGORITHMS[name])
    if not is_import_path(name):
        raise ValidationError.for_parameter(parameter, name, allowed)
    module = name.partition(":")[0]
    try:
        cls = _import(name)
    except (ImportError, AttributeError) as exc:
        raise ValidationError.for_parameter(
            parameter, name, f"{allowed} (it could not be imported: {_one_line(exc)})") from None
    except (Exception, SystemExit) as exc:  # the user's module raised while it was imported
        raise ValidationError.for_parameter(
            parameter, name, f"{allowed} (importing module {module!r} raised "
            f"{type(exc).__name__}: {_one_line(exc)})") from None
    if not (isinstance(cls, type) and issubclass(cls, Algorithm)):
        raise ValidationError.for_parameter(parameter, name, allowed)
    if inspect.isabstract(cls):
        missing = ", ".join(sorted(getattr(cls, "__abstractmethods__", ())))
        raise ValidationError.for_parameter(
            parameter, name, f"an Algorithm subclass that implements every abstract method "
            f"({cls.__name__} does not implement: {missing})")
    return cls


def _one_line(error: BaseException) -> str:
    """An exception's message on one line, at most 300 characters."""
    return bounded_text(" ".join(str(error).split()), 300)


def registered_settings() -> dict[str, Setting]:
    """``key -> Setting`` of every ``algo.*`` setting of the registered
    algorithms, in table order (each declared once; ``ValueError`` if two
    algorithms declare one key differently)."""
    out: dict[str, Setting] = {}
    for name in ALGORITHMS:
        _merge(out, algorithm_class(name))
    return out


def _merge(out: dict[str, Setting], cls: type[Algorithm]) -> None:
    for key, setting in cls.SETTINGS.items():
        if key in out and out[key] is not setting:
            raise ValueError(f"algo.{key} is declared twice ({cls.__name__} and another "
                             "algorithm): share one declaration")
        out[key] = setting


def settings_for(name: Any) -> tuple[type[Algorithm], dict[str, Setting]]:
    """``(class, settings)``: the class of ``name`` and the ``algo.*``
    settings a config with it resolves (every registered one, and the
    class's own when it is not registered)."""
    cls = algorithm_class(name)
    settings = registered_settings()
    for key, setting in cls.SETTINGS.items():
        if settings.setdefault(key, setting) is not setting:
            raise ValidationError.for_parameter(
                "algo.algorithm", name, f"an algorithm whose settings do not redeclare a "
                f"registered algorithm's: algo.{key} is declared by a registered algorithm "
                "(share its declaration, or choose another name)")
    return cls, settings


__all__ = ["ALGORITHMS", "Algorithm", "algo_setting", "algorithm_class", "is_import_path",
           "registered_settings", "scan_updates", "settings_for"]
