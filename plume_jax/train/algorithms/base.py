"""The training-algorithm interface, the table of algorithms, and the helpers
every algorithm needs (layer 5). docs/training.md, "Adding an algorithm",
is a complete example written against this module alone.

A training algorithm is a class derived from :class:`Algorithm`, as a plume
is a class derived from ``Plume``: it says what it provides, the run driver
(:mod:`plume_jax.train.loop`, under ``plume-jax train`` and ``sweep``)
does the rest — chunking, progress, logging, checkpoints, resume, run
folders, sweeps over members, policy export and evaluation.

What an algorithm provides:

- ``name`` (the value of ``algo.algorithm``) and ``SETTINGS``: its own
  ``algo.*`` settings, each declared once, as a component's are: a field
  made with :func:`plume_jax.settings.setting` (default, checker, one line
  of doc) of a frozen dataclass of the settings compiled into the program
  (static) or of the ``chex.dataclass`` of its hyperparameters (dynamic:
  f32[] leaves), ``SETTINGS = declared(Static, Hparams)``;
  :func:`plume_jax.settings.static_part` and
  :func:`~plume_jax.settings.dynamic_part` fill the two from a config (``algo_setting`` declares one in a plain mapping instead). A config's
  ``algo`` section is :data:`plume_jax.train.config.COMMON_ALGO` (the
  settings every algorithm shares: ``algorithm``, ``total_steps``,
  ``num_envs``, ``num_steps``) plus these, and nothing else: another
  algorithm's key is refused as unknown ("did you mean"). Any name but a
  shared one may be declared (``learning_rate`` included); the resolved
  config, the TensorBoard hparams and the config reference list only
  these. Read them back from the config (``config.algo[key]``): they are
  checked and defaulted there, so a constructor never repeats them.
- :meth:`Algorithm.check_config` (optional): checks between settings that
  the config alone decides, run whenever a config is read;
- :meth:`Algorithm.from_config`: build it for a validated config and env
  (check everything the env or config must satisfy here, with
  ``ValidationError``, before anything is compiled), setting the
  attributes the driver and the export read (:class:`Algorithm`'s
  attribute list; :func:`set_spaces` sets the spaces);
- :meth:`Algorithm.hparams`: its *dynamic* settings as a pytree of array
  leaves (a sweep ``vmap``\\ s members that differ only in them;
  ``dynamic_part(Hparams, config.algo)``);
- :meth:`Algorithm.init`: ``(key, hp, env_params) -> runner``, a pytree that
  carries everything from one update to the next and has an ``update``
  field (i32[], updates done);
- :meth:`Algorithm.update`: one update, ``(runner, hp, env_params) ->
  (runner, metrics)`` with a dict of scalar metrics that holds at least
  ``update`` and ``env_steps``;
- :meth:`Algorithm.policy`: the trained policy as ``(spec, arrays)``,
  everything export needs (``agents.trained``'s format;
  :func:`network_policy` makes it for an actor-critic network). The driver
  adds the env settings and the budget to the spec and reads nothing else.

:meth:`Algorithm.run` (many updates in one ``lax.scan``, a dynamic count
of them, ``vmap`` over sweep members) is provided by the base.
:meth:`Algorithm.build` is what the driver calls: ``from_config``, then a
dry run of ``hparams``, ``init`` (abstractly, :func:`jax.eval_shape`) and
``policy`` (on a runner of zeros), so a broken or missing method is a
one-line ``ValidationError`` naming the method before training starts,
never a traceback after it.

The helpers every algorithm needs live here: :func:`declared`, :func:`obs_dim`,
:func:`action_spec`, :func:`num_agents_of`, :func:`set_spaces`,
:func:`actor_critic` (the network the exported policy runs),
:func:`network_policy`, :func:`typed_key` and :func:`scan_updates`.

The table :data:`ALGORITHMS` names the registered algorithms (``name ->
'module:Class'``, imported when first needed). ``algo.algorithm`` may also
be the import path ``'package.module:Class'`` of an algorithm defined
outside plume_jax, found on ``sys.path`` or in the current folder (as
``plume-jax bench --add`` finds its modules): that is how a new algorithm is
tried before it is registered.
"""

from __future__ import annotations

import abc
import functools
import importlib
import inspect
import re
from collections.abc import Mapping
from typing import Any, Callable, ClassVar

import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
from gymnax.environments import spaces as gymnax_spaces

from plume_jax.core.errors import ValidationError, bounded_text
from plume_jax.settings import Checker, Setting
from plume_jax.settings.schema import declared_settings
from plume_jax.train.algorithms import networks
from plume_jax.train.checkpoint import POLICY_FORMAT, policy_arrays
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


def declared(static: type | None = None, hparams: type | None = None) -> dict[str, Setting]:
    """An algorithm's ``SETTINGS`` from its two declarations, as a
    component's come from its class and its ``Params``: each setting is a
    field made with :func:`plume_jax.settings.setting` (default, checker,
    doc) of ``static``, the frozen dataclass of the settings compiled into
    the program (sweep members that differ in them run as separate
    programs), or of ``hparams``, the ``chex.dataclass`` of its
    hyperparameters (f32[] leaves: a sweep ``vmap``\\ s members that differ
    only in them). Static settings first, each class's in field order.
    Fields made otherwise (``num_envs``, ``network``) are not ``algo.*``
    settings of its own: :func:`plume_jax.settings.static_part` is given them."""
    return declared_settings(static, hparams)


class Algorithm(abc.ABC):
    """Base of every training algorithm (module docstring).

    Attributes every instance sets in ``from_config`` (of an algorithm, the
    driver and the export read these and nothing else; :func:`set_spaces`
    sets the spaces):
        env: the env it trains on (static).
        num_updates: the updates of the whole run (``config.num_updates``).
        steps_per_update: env steps per update (``config.steps_per_update``),
            by which its metrics count ``env_steps`` (the loop places progress
            by the config's own).
        discrete, action_dim, action_low, action_high, obs_dim, num_agents,
            multi_agent: the spaces of the policy (one agent's; ``action_low``
            / ``action_high`` f32[action_dim] for a Box, else None).
        mesh: the device mesh the env batch is sharded on, or None.
    """

    #: ``algo.algorithm`` of this algorithm (its import path when it is not registered).
    name: ClassVar[str] = ""
    #: its own ``algo.*`` settings (the shared ones: ``plume_jax.train.config.COMMON_ALGO``).
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
    action_low: Any = None
    action_high: Any = None
    obs_dim: int = 0
    num_agents: int = 1
    multi_agent: bool = False
    mesh: Any = None

    # ------------------------------------------------------------ building
    @classmethod
    def check_config(cls, config: Any) -> None:
        """Checks between settings that the config alone decides (no env
        needed), run whenever a config naming this algorithm is read, so a
        sweep grid is refused before anything is built: ``ValidationError``
        naming the setting. Default: none."""
        return None

    @classmethod
    @abc.abstractmethod
    def from_config(cls, config: Any, env: Any, env_params: Any, mesh: Any = None
                    ) -> "Algorithm":
        """The algorithm for a validated ``TrainConfig`` on ``env``;
        ``ValidationError`` for anything it cannot train, before compiling.
        ``mesh``: the devices to shard the env batch on (only when
        ``shards_env_batch``), else None."""

    @abc.abstractmethod
    def hparams(self, config: Any, env_params: Any) -> Any:
        """The dynamic settings as a pytree of array leaves."""

    @classmethod
    def build(cls, config: Any, env: Any, env_params: Any, mesh: Any = None) -> "Algorithm":
        """:meth:`from_config`, then a dry run of every method the driver
        calls after training has started (:func:`check_methods`), so a
        broken one is a one-line ``ValidationError`` naming the method now
        rather than a traceback once training is over."""
        algo = _call(cls, "from_config", cls.from_config, config, env, env_params, mesh=mesh)
        if not isinstance(algo, Algorithm):
            raise _broken(cls, "from_config", f"returned {type(algo).__name__}, not an instance "
                          "of the class")
        check_methods(algo, config, env_params)
        return algo

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
        metrics on the host (see :func:`scan_updates`). An exception
        :meth:`update` raises while it is traced (before anything runs) is
        a one-line ``ValidationError`` naming ``update``."""
        if batched and not self.sweepable:
            raise ValidationError.for_parameter(
                "algo.algorithm", self.name, "an algorithm whose members can run together "
                f"(sweepable) for a sweep; {self.name!r} trains one run at a time")
        if batched:
            def step(r: Any) -> tuple[Any, dict[str, Any]]:
                return self.batched_step(r, hp, env_params)
        else:
            def step(r: Any) -> tuple[Any, dict[str, Any]]:
                return self.update(r, hp, env_params)

        def checked(r: Any) -> tuple[Any, dict[str, Any]]:
            return _call(type(self), "update", step, r)

        return scan_updates(checked, runner,
                            num_updates=num_updates, last=self.num_updates, callback=callback,
                            log_every=log_every, batched=batched, count=count)

    def batched_update(self, runner: Any, hp: Any, env_params: Any) -> tuple[Any, dict]:
        """The update :meth:`run` ``vmap``\\ s over sweep members (default:
        :meth:`update`)."""
        return self.update(runner, hp, env_params)

    def batched_step(self, runner: Any, hp: Any, env_params: Any) -> tuple[Any, dict]:
        """One update of every member of a batched program (every argument
        with a leading member axis but ``env_params``' shared leaves):
        :meth:`batched_update` ``vmap``\\ ped (the default). An algorithm
        overrides it to run part of its update once for all members: work
        whose schedule every member shares (a periodic evaluation) under a
        ``lax.cond`` that ``vmap`` would turn into a ``select``, running it at
        every update."""
        return vmap_members(self.batched_update, runner, hp, env_params)

    # ------------------------------------------------------------ export
    @abc.abstractmethod
    def policy(self, runner: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        """``(spec, arrays)`` of the trained policy: everything export needs
        (``agents.trained``'s format, :func:`network_policy` for an
        actor-critic; the arrays may keep a leading member axis of a
        batched runner). The driver adds the env settings and the budget."""


    def warm_start(self, runner: Any, arrays: dict[str, Any]) -> Any:
        """``runner`` (one member's, fresh from :meth:`init`) with a trained
        policy's arrays loaded into it (``run.init_from``:
        :mod:`plume_jax.train.warm_start`, which has already checked that
        ``arrays`` has the names and shapes :meth:`policy` gives). Default:
        ``ValidationError``, the algorithm cannot start from a policy."""
        raise cannot_continue(self.name)

    @classmethod
    def can_warm_start(cls) -> bool:
        """Whether this algorithm implements :meth:`warm_start`."""
        return cls.warm_start is not Algorithm.warm_start

    @classmethod
    def resume_notes(cls, algo: Mapping[str, Any], update: int, old_updates: int,
                     new_updates: int) -> list[str]:
        """What resuming a run at update ``update`` under a new budget
        (``new_updates`` updates where the checkpoint's run had
        ``old_updates``) does to this algorithm's own settings, one line each
        for the console and the summary; ``algo``: the new config's ``algo``
        section. The resume code knows no setting: it asks here.

        Default: nothing (an epochs algorithm that anneals its step size
        says how it jumps: :func:`~plume_jax.train.algorithms.epochs.annealing_resume_notes`)."""
        return []


def cannot_continue(algo_name: str, source: Any = "(set)") -> ValidationError:
    """The error for ``run.init_from`` on an algorithm that has no
    :meth:`Algorithm.warm_start`."""
    return ValidationError.for_parameter(
        "run.init_from", source, f"null for algorithm {algo_name!r}: it cannot start from a "
        "trained policy")


# ------------------------------------------------------------------ checking the methods
def _broken(cls: type, method: str, what: str) -> ValidationError:
    """The one-line error for a method of ``cls`` that does not work."""
    return ValidationError.for_parameter(
        "algo.algorithm", getattr(cls, "name", "") or cls.__name__,
        f"an Algorithm whose {method}() works (plume_jax.train.algorithms.base): "
        f"{cls.__name__}.{method}() {what}")


def _call(cls: type, method: str, function: Callable, *args: Any, **kwargs: Any) -> Any:
    """``function(*args, **kwargs)``; an exception it raises, other than a
    ``ValidationError`` (a setting refused: already one line), becomes the
    one-line error naming ``method`` (the cause chained, for a traceback
    in Python)."""
    try:
        return function(*args, **kwargs)
    except ValidationError:
        raise
    except Exception as exc:
        raise _broken(cls, method, f"raised {type(exc).__name__}: {_one_line(exc)}") from exc


def check_methods(algo: Algorithm, config: Any, env_params: Any) -> None:
    """A dry run of ``algo``'s methods: ``hparams``; ``init`` traced
    abstractly (:func:`jax.eval_shape`: nothing is computed or compiled),
    its runner having an ``update`` field; ``policy`` on a runner of zeros
    of that shape, giving a ``(spec, arrays)`` pair of mappings whose spec
    names its ``format``. ``ValidationError`` naming the first method that
    fails (``update`` is checked when it is traced, by :meth:`Algorithm.run`)."""
    cls = type(algo)
    hp = _call(cls, "hparams", algo.hparams, config, env_params)
    shapes = _call(cls, "init", jax.eval_shape, algo.init, jax.random.key(0), hp, env_params)
    if not hasattr(shapes, "update"):
        raise _broken(cls, "init", "returned a runner without an 'update' field (i32[], "
                      "updates done)")
    zeros = jax.tree.map(lambda s: np.zeros(s.shape, s.dtype)
                         if not jax.dtypes.issubdtype(s.dtype, jax.dtypes.prng_key)
                         else jax.random.key(0), shapes)
    out = _call(cls, "policy", algo.policy, zeros)
    if not (isinstance(out, tuple) and len(out) == 2 and all(isinstance(x, Mapping) for x in out)
            and "format" in out[0]):
        raise _broken(cls, "policy", "did not return (spec, arrays): two mappings, the spec "
                      "with a 'format' (network_policy makes both for an actor-critic)")


# ------------------------------------------------------------------ helpers every algorithm needs
def num_agents_of(env: Any) -> int | None:
    """Agents per env of a multi-agent env (``env.is_multi_agent``: its
    observations, actions and rewards carry an agent axis), else None."""
    return env.num_agents if getattr(env, "is_multi_agent", False) else None


def obs_dim(env: Any, env_params: Any) -> int:
    """Size of one agent's flattened observation (``ValidationError`` for a
    dict observation: the networks read one array)."""
    space = env.observation_space(env_params)
    if not hasattr(space, "shape") or isinstance(space, gymnax_spaces.Dict):
        raise ValidationError.for_parameter(
            "observation_space", space, "an array observation (a Box); dict observations are "
            "not supported by the trainer (use a Box-form composite sensor)")
    shape = tuple(space.shape)[1:] if num_agents_of(env) is not None else tuple(space.shape)
    return int(np.prod(shape, dtype=np.int64))


def action_spec(env: Any, env_params: Any) -> tuple[bool, int, Any, Any]:
    """``(discrete, action_dim, low, high)`` of the env's (one agent's)
    action space: Discrete, or a 1-D Box with finite bounds (``low`` and
    ``high`` f32[action_dim]; None for Discrete)."""
    space = env.action_space(env_params)
    if isinstance(space, gymnax_spaces.Discrete):
        return True, int(space.n), None, None
    if isinstance(space, gymnax_spaces.Box):
        shape = tuple(space.shape)
        if len(shape) != 1:
            raise ValidationError.for_parameter("action_space", space,
                                                "Discrete or a 1-D Box (the trainer's action "
                                                "spaces)")
        low = np.broadcast_to(np.asarray(space.low, np.float32), shape).copy()
        high = np.broadcast_to(np.asarray(space.high, np.float32), shape).copy()
        if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
            raise ValidationError.for_parameter("action_space", space, "a Box with finite bounds")
        return False, shape[0], low, high
    raise ValidationError.for_parameter("action_space", space, "Discrete or a 1-D Box")


def set_spaces(algo: Algorithm, env: Any, env_params: Any) -> None:
    """Set ``algo.env`` and the policy's spaces (:class:`Algorithm`'s
    attributes ``discrete`` ... ``multi_agent``) from ``env``."""
    algo.env = env
    algo.discrete, algo.action_dim, algo.action_low, algo.action_high = action_spec(
        env, env_params)
    algo.obs_dim = obs_dim(env, env_params)
    algo.multi_agent = num_agents_of(env) is not None
    algo.num_agents = num_agents_of(env) or 1


def actor_critic(algo: Algorithm, network: Any, value_only: bool = False) -> Any:
    """The flax actor-critic (:class:`plume_jax.train.algorithms.networks.ActorCritic`)
    for ``algo``'s spaces and a ``NetworkConfig`` (``config.network``): the
    network :func:`network_policy` exports and ``agents.trained`` runs.
    ``networks.init_params(net, key, in_dim)`` initialises it;
    ``net.apply(params, hidden[B, H], x[T, B, D], start[T, B])`` gives
    ``(hidden, dist, value)`` (``H``: ``networks.hidden_size(network)``;
    ``dist``: ``(logits or mean, log_std)``, read by ``networks.sample``,
    ``networks.log_prob`` and ``networks.entropy``)."""
    return networks.ActorCritic(network, algo.action_dim, algo.discrete, algo.num_agents,
                                value_only=value_only)


def network_spec(algo: Algorithm, network: Any, normalize_obs: bool = False) -> dict[str, Any]:
    """The JSON spec of an actor-critic policy of ``algo`` with the network
    settings ``network`` (a ``NetworkConfig``); ``normalize_obs``: the
    arrays hold ``obs_mean`` / ``obs_var``. Reads only :class:`Algorithm`'s
    declared attributes."""
    import dataclasses

    net = dataclasses.asdict(network)
    net["hidden_sizes"] = list(net["hidden_sizes"])

    def bounds(values: Any) -> list[float] | None:
        return None if algo.discrete else [float(v) for v in values]

    return {"format": POLICY_FORMAT, "algorithm": algo.name, "network": net,
            "discrete": bool(algo.discrete), "action_dim": int(algo.action_dim),
            "action_low": bounds(algo.action_low), "action_high": bounds(algo.action_high),
            "obs_dim": int(algo.obs_dim), "normalize_obs": bool(normalize_obs),
            "num_agents": int(algo.num_agents)}  # agents per env in training


def network_policy(algo: Algorithm, params: Any, network: Any, obs_stats: Any = None
                   ) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(spec, arrays)`` of an actor-critic policy (:func:`actor_critic`'s
    ``params``, ``network`` its ``NetworkConfig``; ``obs_stats`` the running
    observation statistics when observations are normalised): what
    :meth:`Algorithm.policy` returns for such a policy."""
    return (network_spec(algo, network, obs_stats is not None),
            policy_arrays(params, obs_stats))


def typed_key(key: jax.Array) -> jax.Array:
    """A typed PRNG key from a typed key or raw key data (u32[2]). Runners
    keep raw key data (``jax.random.key_data``): it checkpoints as an
    array."""
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        return key
    return jax.random.wrap_key_data(key)


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
    """``module:Class`` imported from ``sys.path``, else from the current
    folder (where ``plume-jax`` was started: a console script, unlike
    ``python -m``, does not put it on ``sys.path``; ``plume-jax bench
    --add`` finds its modules there too). The folder is on ``sys.path``
    only while the module is imported."""
    module, _, attr = path.partition(":")
    try:
        found = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        here = os.getcwd()
        top = module.partition(".")[0]
        if exc.name != top or here in sys.path or not (
                os.path.isfile(os.path.join(here, f"{top}.py"))
                or os.path.isdir(os.path.join(here, top))):
            raise
        sys.path.insert(0, here)
        try:
            found = importlib.import_module(module)
        finally:
            sys.path.remove(here)
    return getattr(found, attr)


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


def settings_for(name: Any) -> tuple[type[Algorithm], dict[str, Setting]]:
    """``(class, settings)``: the class of ``name`` (:func:`algorithm_class`)
    and its own ``algo.*`` settings (``SETTINGS``; a config's algo section
    is these plus the shared ones, :func:`plume_jax.train.config.schemas`)."""
    cls = algorithm_class(name)
    return cls, dict(cls.SETTINGS)


def readers(key: str) -> list[str]:
    """The registered algorithms that declare ``algo.<key>``."""
    return [n for n in ALGORITHMS if key in algorithm_class(n).SETTINGS]


__all__ = ["ALGORITHMS", "Algorithm", "action_spec", "actor_critic", "algo_setting",
           "algorithm_class", "check_methods", "declared", "is_import_path",
           "network_policy", "network_spec", "num_agents_of", "obs_dim", "readers",
           "scan_updates", "set_spaces", "settings_for", "typed_key"]
