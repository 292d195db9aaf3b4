"""PPO whose whole update — rollout, GAE, minibatch epochs — is one pure
function, so any number of updates compiles into one XLA program
(``lax.scan`` over :meth:`PPO.update`) and ``vmap`` turns it into a sweep.

Works with any gymnax-style env whose ``step(key, state, action, params)``
returns ``(obs, state, reward, terminated, truncated, info)``, auto-resets,
and puts the pre-reset observation in ``info["final_observation"]`` (every
``PlumeEnv`` does), and with :class:`~plume_jax.envs.multi_agent.MultiAgentPlumeEnv`
(below).

Termination vs truncation
-------------------------
A *terminated* step (the goal was reached: a true terminal state) bootstraps
nothing: ``target = r``. A *truncated* step (the time limit, which is not
part of the state) bootstraps from the value of the observation the episode
was cut at, ``info["final_observation"]``: ``target = r + γ V(s_final)``.
The value of the auto-reset observation that ``step`` returns instead
belongs to a new episode and is never used across the boundary. In both
cases the GAE recursion stops at the boundary. See
:func:`~plume_jax.train.algorithms.returns.gae`.

Recurrent policies
------------------
The recurrent state (``network.type`` ``gru`` or ``rnn``) is zeroed at the
first observation of every episode (the ``start`` flag, set after every
``terminated or truncated``), both while acting and when the rollout is
replayed in training; training minibatches are whole env sequences (an
equal share of the envs each) replayed from the state the rollout started
with.

Many agents
-----------
On a :class:`~plume_jax.envs.multi_agent.MultiAgentPlumeEnv` every agent acts
from its own observation with one shared network (parameter sharing): the
agent axis joins the batch, so the network sees ``R = num_envs x
num_agents`` rows (agent-minor: an env's agents are contiguous) and one
update's gradient sums over every agent's transitions. Rewards, values,
advantages and returns are per agent; an agent's return ends
(:func:`agent_boundaries`) where

- it reaches the goal (the env's ``terminated``): ``target = r``;
- the team's episode ends otherwise than by the time limit (``done_mode
  "any"``: a teammate arrived first): a true end for every agent, ``target =
  r``;
- the time limit cuts the episode (the env's ``truncated``): bootstrap from
  ``info["final_observation"]``, as above.

An agent that has arrived while its team goes on (``done_mode "all"``) is
frozen by the env and earns nothing; its later steps say nothing about
acting, so they are masked out of the loss (``Transition.active``): every
mean in :meth:`PPO.loss`, the advantage normalisation included, is over
active rows only (the running observation statistics still include them:
they are real observations). Minibatches keep the agents of one env
together (the centralised critic, ``network.critic: centralised``, reads
them all). With one agent every row is active and the algorithm is
single-agent PPO.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import chex
import jax
import jax.numpy as jnp
import optax

from plume_jax.envs.plume_env import batched_step
from plume_jax.core.errors import ValidationError
from plume_jax.core.pytree import Pytree
from plume_jax.settings import boolean, real, setting
from plume_jax.train.algorithms import networks
from plume_jax.train.algorithms.base import (  # noqa: F401 (action_spec, obs_dim, num_agents_of:
    Algorithm, action_spec, actor_critic, declared, network_policy,  # re-exported)
    num_agents_of, obs_dim, set_spaces, typed_key)
from plume_jax.train.algorithms.epochs import (  # noqa: F401 (resolve_gamma: re-exported)
    AdamHparams, EpochStatic, adam, annealing_resume_notes, check_minibatches, divide_batch,
    learning_rate_at, resolve_gamma)
from plume_jax.train.algorithms.normalize import ObsStats, normalize, transform
from plume_jax.train.algorithms.returns import gae, scale_rewards


@dataclasses.dataclass(frozen=True)
class PPOStatic(EpochStatic):
    """PPO's settings compiled into the program (shapes and code paths): the
    shared ones (:class:`~plume_jax.train.algorithms.epochs.EpochStatic`) and these."""

    clip_value: bool = setting(True, boolean(), doc="PPO value clipping")
    normalize_rewards: bool = setting(False, boolean(),
                                      doc="rewards divided by the running std of the discounted "
                                          "return, then clipped to +-10 (as VecNormalize does)")
    normalize_advantages: bool = setting(True, boolean(), doc="advantages scaled per minibatch")


@chex.dataclass(frozen=True)
class Hparams(AdamHparams):
    """PPO's hyperparameters, array leaves (sweepable under vmap): the shared
    ones (:class:`~plume_jax.train.algorithms.epochs.AdamHparams`) and these."""

    gae_lambda: jax.Array = setting(0.95, real(low=0.0, high=1.0), doc="GAE lambda")
    clip_eps: jax.Array = setting(0.2, real(low=0.0, high=10.0, low_inclusive=False),
                                  doc="PPO ratio clip")
    ent_coef: jax.Array = setting(0.01, real(low=0.0, high=10.0), doc="entropy bonus weight")
    vf_coef: jax.Array = setting(0.5, real(low=0.0, high=100.0), doc="value loss weight")
    weight_decay: jax.Array = setting(0.0, real(low=0.0, high=1.0),
                                      doc="coupled L2 penalty: this x params added to the clipped "
                                          "gradient before Adam, as PyTorch's Adam does (0: none)")


@chex.dataclass(frozen=True)
class Runner(Pytree):
    """Everything training carries from one update to the next.

    ``R`` is the number of rows: ``num_envs x num_agents`` on a multi-agent
    env (agent-minor), else ``num_envs``.

    Attributes:
        params, opt_state: network parameters and optimiser state.
        obs_stats: running observation statistics (read where
            :meth:`PPO.obs_normalizer` says).
        env_state, obs: the env batch (leading axis ``num_envs``).
        hidden: f32[R, H] recurrent state after the last observation.
        prev_action: the last action of each row (network input when
            ``network.prev_action``).
        prev_obs: f32[R, D], the last transformed observation each row acted
            on (for the ``network.obs_delta`` feature).
        start: bool[R], ``obs`` is the first observation of an episode.
        ep_return: f32[R], each agent's return in the running episode.
        ep_length: i32[num_envs], the running episode's length.
        arrived: bool[R], the agent reached the goal earlier in the running
            episode (frozen: its steps are masked out of the loss).
        key: u32[2], raw PRNG key data (serialisable).
        update: i32[], updates done.
    """

    params: Any
    opt_state: Any
    obs_stats: ObsStats
    env_state: Any
    obs: jax.Array
    hidden: jax.Array
    prev_action: jax.Array
    prev_obs: jax.Array
    start: jax.Array
    ep_return: jax.Array
    ep_length: jax.Array
    arrived: jax.Array
    key: jax.Array
    update: jax.Array


@chex.dataclass(frozen=True)
class RewardScalingRunner(Runner):
    """The runner when rewards are scaled: a :class:`Runner` (whose
    structure, and so its checkpoints, stay as they were without scaling)
    plus the state of :func:`~plume_jax.train.algorithms.returns.scale_rewards`.

    Attributes:
        return_stats: the running statistics of the discounted return
            (:class:`ObsStats` of one dimension).
        discounted_return: f32[R], each row's discounted return so far in
            its running episode.
    """

    return_stats: ObsStats
    discounted_return: jax.Array


@chex.dataclass(frozen=True)
class Transition(Pytree):
    """One rollout step (stacked: a leading time axis ``T``). Per row
    (``[R]``) or per env (``[N]``)."""

    x: jax.Array              # [R, D] network input (normalised obs [+ previous action])
    start: jax.Array          # [R] first observation of an episode
    action: jax.Array         # [R] the sampled action (normalised for Box actions)
    logp: jax.Array           # [R]
    value: jax.Array          # [R]
    reward: jax.Array         # [R] what GAE reads (scaled, when rewards are)
    terminated: jax.Array     # [R] the return ends, no bootstrap (agent_boundaries)
    truncated: jax.Array      # [R] the return ends, bootstrap from final_value
    final_value: jax.Array    # [R] V(info["final_observation"])
    active: jax.Array         # [R] the agent had not arrived before this step
    ep_return: jax.Array      # [R] the agent's return so far, including this step
    feat: jax.Array           # [R, F] unnormalised features (for the running statistics)
    done: jax.Array           # [N] the env's episode ended at this step
    success: jax.Array        # [N] ... at the goal (the team's, as done_mode says)
    ep_length: jax.Array      # [N] the episode's length so far, including this step
    first_arrival: jax.Array  # [N] the episode's first agent arrived at this step
    arrivals: jax.Array       # [N] agents at the goal after this step
    blocked: jax.Array        # [N] moves blocked by another agent at this step


#: Names of the per-update metrics :meth:`PPO.update` returns.
METRIC_NAMES = ("update", "env_steps", "episodes", "return_mean", "length_mean",
                "success_rate", "loss", "pg_loss", "vf_loss", "entropy", "approx_kl",
                "clip_frac", "learning_rate", "value_mean")

#: The further per-update metrics on a multi-agent env: agent steps
#: (``env_steps x num_agents``); the mean time to the first arrival (steps)
#: over the episodes whose first agent arrived in the update; the agents at
#: the goal when an episode ended, and the moves blocked by another agent
#: (collisions), per ended episode. There ``success_rate`` is the team's
#: (``done_mode``: the first arrival, or all agents) and ``return_mean`` the
#: mean per-agent episode return.
MULTI_AGENT_METRIC_NAMES = ("agent_steps", "first_arrival_mean", "arrivals_mean",
                            "collisions_mean")


def agent_boundaries(terminated: jax.Array, truncated: jax.Array, episode_done: jax.Array
                     ) -> tuple[jax.Array, jax.Array]:
    """Where each agent's return ends, and how (see the module docstring).

    Args:
        terminated: bool[N, A], the env's per-agent ``terminated`` (the agent
            has reached the goal, at this step or before).
        truncated: bool[N, A], the env's per-agent ``truncated`` (the time
            limit cut the episode before the agent arrived).
        episode_done: bool[N], the env's episode ended at this step.

    Returns:
        ``(terminated, truncated)`` for
        :func:`~plume_jax.train.algorithms.returns.gae`, bool[N, A]: truncated
        where the env says so (and the agent has not arrived); terminated
        where the agent has arrived, or the episode ended otherwise than by
        the time limit (a teammate's arrival under ``done_mode="any"``). For
        one agent: ``(terminated, truncated & ~terminated)``.
    """
    trunc = truncated & ~terminated
    term = ~trunc & (terminated | episode_done[:, None])
    return term, trunc


def masked_mean(x: jax.Array, mask: jax.Array) -> jax.Array:
    """The mean of ``x`` where ``mask`` (f32, 0 or 1, broadcast to ``x``) is 1;
    0 where it is 0 everywhere."""
    mask = jnp.broadcast_to(mask, x.shape)
    return jnp.sum(x * mask) / jnp.maximum(jnp.sum(mask), 1.0)


#: The ``algo.*`` settings of PPO, as :class:`PPOStatic` and :class:`Hparams` declare them.
PPO_SETTINGS = declared(PPOStatic, Hparams)


def ppo_static(config: Any) -> PPOStatic:
    """The compiled-in settings of a ``TrainConfig`` (``PPOStatic.from_config``)."""
    return PPOStatic.from_config(config)


def ppo_hparams(config: Any, env: Any, env_params: Any) -> Hparams:
    """The hyperparameters of a ``TrainConfig`` (``Hparams.from_config``)."""
    return Hparams.from_config(config, env, env_params)


class PPO(Algorithm):
    """PPO for one env structure and one static configuration.

    Args:
        env: a gymnax-style env (static), or a
            :class:`~plume_jax.envs.multi_agent.MultiAgentPlumeEnv` (one network
            shared by its agents; see the module docstring).
        env_params: example params (shapes only; the params actually used
            are passed to :meth:`init` and :meth:`update`).
        static: the compiled-in settings.
        mesh, axis: optional ``jax.sharding.Mesh`` and axis name; the env
            batch (every leaf of ``Runner`` with a leading ``num_envs`` or
            row axis) is kept sharded along it (see
            :mod:`plume_jax.train.distributed`).

    Raises:
        ValidationError: settings this env cannot train with (an action or
            observation space PPO does not handle, minibatches that do not
            divide the batch, a centralised critic without several agents),
            before anything is compiled.
    """

    name = "ppo"
    SETTINGS = PPO_SETTINGS
    resume_notes = staticmethod(annealing_resume_notes)
    shards_env_batch = True

    def __init__(self, env: Any, env_params: Any, static: PPOStatic, mesh: Any = None,
                 axis: str = "envs"):
        set_spaces(self, env, env_params)
        self.static = static
        self.num_updates = static.num_updates
        self.steps_per_update = static.num_envs * static.num_steps
        #: network rows per rollout step: envs x agents
        self.rows = static.num_envs * self.num_agents
        if static.network.critic == "centralised" and self.num_agents < 2:
            raise ValidationError.for_parameter(
                "network.critic", static.network.critic,
                f"'decentralised' for an env with {self.num_agents} agent (a centralised critic "
                "reads the other agents' features; it needs a multi-agent env with "
                "num_agents >= 2)")
        self.feat_dim = self.obs_dim * (2 if static.network.obs_delta else 1)
        self.net = actor_critic(self, static.network)
        self.in_dim = networks.input_size(self.feat_dim, static.network, self.action_dim)
        self.hidden_dim = networks.hidden_size(static.network)
        self.mesh = mesh
        self.axis = axis
        divide_batch("num_minibatches", static.num_envs, static.num_steps,
                     static.num_minibatches, static.network.recurrent)

    @classmethod
    def check_config(cls, config: Any) -> None:
        check_minibatches(config)

    @classmethod
    def from_config(cls, config: Any, env: Any, env_params: Any, mesh: Any = None) -> "PPO":
        return cls(env, env_params, PPOStatic.from_config(config), mesh=mesh)

    def hparams(self, config: Any, env_params: Any) -> Hparams:
        return Hparams.from_config(config, self.env, env_params)

    def policy(self, runner: Runner) -> tuple[dict[str, Any], dict[str, Any]]:
        return network_policy(self, runner.params, self.static.network,
                              self.obs_normalizer(runner))

    def obs_normalizer(self, runner: Runner) -> ObsStats | None:
        """The running observation statistics the policy normalises its
        input with, or None where observations are not normalised."""
        return runner.obs_stats if self.static.normalize_obs else None

    def warm_start(self, runner: Runner, arrays: dict[str, Any]) -> Runner:
        """``runner`` with an exported policy's network parameters (names as
        ``policy.npz`` flattens them) and, where observations are normalised,
        its observation mean and variance, counted as one update's observations
        (``rows x num_steps``) so that the statistics follow the new env
        within a few updates (:mod:`plume_jax.train.warm_start`)."""
        from flax import traverse_util

        flat = traverse_util.flatten_dict(runner.params["params"], sep="/")
        loaded = {name: jnp.asarray(arrays[name], leaf.dtype) for name, leaf in flat.items()}
        params = dict(runner.params)
        params["params"] = traverse_util.unflatten_dict(loaded, sep="/")
        params = jax.tree.map(lambda _, x: x, runner.params, params)  # the original containers
        stats = runner.obs_stats
        if self.obs_normalizer(runner) is not None:
            stats = ObsStats(mean=jnp.asarray(arrays["obs_mean"], jnp.float32),
                             var=jnp.asarray(arrays["obs_var"], jnp.float32),
                             count=jnp.asarray(self.rows * self.static.num_steps, jnp.float32))
        return runner.replace(params=params, obs_stats=stats)

    def batched_update(self, runner: Runner, hp: Hparams, env_params: Any):
        return self.update(runner, hp, env_params, vmapped=True)

    # ------------------------------------------------------------ helpers
    def to_rows(self, x: jax.Array) -> jax.Array:
        """An env-batch array ``[N, A, ...]`` as rows ``[N*A, ...]`` (a
        single-agent env's ``[N, ...]`` is already rows)."""
        return jnp.reshape(x, (-1,) + x.shape[2:]) if self.multi_agent else x

    def to_agents(self, x: jax.Array) -> jax.Array:
        """Rows ``[N*A, ...]`` as the env's ``[N, A, ...]`` (the inverse of
        :meth:`to_rows`)."""
        return jnp.reshape(x, (-1, self.num_agents) + x.shape[1:]) if self.multi_agent else x

    def preprocess(self, obs: jax.Array) -> jax.Array:
        """f32[R, D]: flattened, transformed (not yet normalised) observations of rows."""
        obs = jnp.reshape(jnp.asarray(obs, jnp.float32), (obs.shape[0], -1))
        return transform(obs, self.static.network.obs_transform, self.static.network.log_eps)

    def features(self, tobs: jax.Array, prev_tobs: jax.Array, start: jax.Array) -> jax.Array:
        """f32[R, F]: the transformed observation, followed (``obs_delta``) by
        its change since the previous step (zero at an episode's start)."""
        if not self.static.network.obs_delta:
            return tobs
        delta = jnp.where(start[:, None], 0.0, tobs - prev_tobs)
        return jnp.concatenate([tobs, delta], axis=-1)

    def net_input(self, feat: jax.Array, stats: ObsStats | None, prev_action: jax.Array,
                  start: jax.Array) -> jax.Array:
        x = normalize(feat, stats)
        if self.static.network.prev_action:
            pa = networks.action_features(self.discrete, self.action_dim, prev_action)
            pa = jnp.where(start[:, None], 0.0, pa)
            x = jnp.concatenate([x, pa], axis=-1)
        return x

    def step_net(self, params: Any, hidden: jax.Array, x: jax.Array, start: jax.Array):
        """One time step for a batch of rows: ``(hidden', dist, value)``."""
        hidden, dist, value = networks.apply_network(self.net, params, hidden, x[None],
                                                     start[None])
        return hidden, jax.tree.map(lambda a: a[0], dist), value[0]

    def outcome(self, reward: Any, terminated: Any, truncated: Any, info: dict[str, Any],
                arrived: jax.Array) -> dict[str, jax.Array]:
        """What one batched env step means for training.

        Args:
            reward, terminated, truncated, info: the batched env step's
                outputs (``[N, A]`` per agent on a multi-agent env, else ``[N]``).
            arrived: bool[R], the agents that had arrived before the step.

        Returns:
            per row (``[R]``): ``reward``, ``terminated`` and ``truncated``
            (:func:`agent_boundaries`), ``done`` (the episode ended),
            ``arrived`` (after the step, within the running episode); per env
            (``[N]``): ``episode_done``, ``success`` (ended at the goal: the
            first arrival or all agents, as ``done_mode`` says), ``first_arrival``
            (the episode's first agent arrived at this step), ``arrivals``
            (agents at the goal), ``blocked`` (moves blocked by another agent).
        """
        by_env = (-1, self.num_agents)
        term_env = jnp.reshape(jnp.asarray(terminated, bool), by_env)
        trunc_env = jnp.reshape(jnp.asarray(truncated, bool), by_env)
        if self.multi_agent:
            done = jnp.asarray(info["done"], bool)
        else:
            done = term_env[:, 0] | trunc_env[:, 0]
        term, trunc = agent_boundaries(term_env, trunc_env, done)
        goal = term_env & jnp.reshape(jnp.asarray(info.get("goal_reached", terminated), bool),
                                      by_env)
        before = jnp.reshape(arrived, by_env)
        blocked = (jnp.sum(jnp.reshape(info["blocked"], by_env), axis=1, dtype=jnp.int32)
                   if "blocked" in info else jnp.zeros(done.shape, jnp.int32))
        done_rows = jnp.broadcast_to(done[:, None], term_env.shape)
        return {
            "reward": jnp.reshape(jnp.asarray(reward, jnp.float32), (-1,)),
            "terminated": jnp.reshape(term, (-1,)),
            "truncated": jnp.reshape(trunc, (-1,)),
            "done": jnp.reshape(done_rows, (-1,)),
            "arrived": jnp.reshape(term_env & ~done_rows, (-1,)),
            "episode_done": done,
            "success": done & ~jnp.any(trunc, axis=1) & jnp.any(goal, axis=1),
            "first_arrival": jnp.any(term_env & ~before, axis=1) & ~jnp.any(before, axis=1),
            "arrivals": jnp.sum(term_env, axis=1, dtype=jnp.int32),
            "blocked": blocked,
        }

    def constrain(self, runner: Runner) -> Runner:
        """Keep the env-batch leaves of ``runner`` sharded along the mesh axis."""
        if self.mesh is None:
            return runner
        from plume_jax.train.distributed import BATCH_FIELDS, constrain_batch

        return runner.replace(**{name: constrain_batch(getattr(runner, name), self.mesh,
                                                       self.axis)
                                 for name in BATCH_FIELDS if hasattr(runner, name)})

    # ------------------------------------------------------------ init
    def init(self, key: jax.Array, hp: Hparams, env_params: Any) -> Runner:
        """A fresh runner: network init, env batch reset."""
        s = self.static
        rows = self.rows
        k_net, k_env, k_run = jax.random.split(typed_key(key), 3)
        params = networks.init_params(self.net, k_net, self.in_dim)
        opt_state = adam(hp, s, jnp.zeros((), jnp.int32), hp.weight_decay).init(params)
        obs, env_state = jax.vmap(self.env.reset, in_axes=(0, None))(
            jax.random.split(k_env, s.num_envs), env_params)
        if self.discrete:
            prev_action = jnp.zeros(rows, jnp.int32)
        else:
            prev_action = jnp.zeros((rows, self.action_dim), jnp.float32)
        runner = Runner(
            params=params, opt_state=opt_state, obs_stats=ObsStats.create(self.feat_dim),
            env_state=env_state, obs=obs,
            hidden=jnp.zeros((rows, self.hidden_dim), jnp.float32),
            prev_action=prev_action,
            prev_obs=jnp.zeros((rows, self.obs_dim), jnp.float32),
            start=jnp.ones(rows, bool),
            ep_return=jnp.zeros(rows, jnp.float32),
            ep_length=jnp.zeros(s.num_envs, jnp.int32),
            arrived=jnp.zeros(rows, bool),
            key=jax.random.key_data(k_run), update=jnp.asarray(0, jnp.int32))
        if s.normalize_rewards:
            runner = RewardScalingRunner(**{f.name: getattr(runner, f.name)
                                            for f in dataclasses.fields(Runner)},
                                         return_stats=ObsStats.create(1),
                                         discounted_return=jnp.zeros(rows, jnp.float32))
        return self.constrain(runner)

    # ------------------------------------------------------------ rollout
    def env_step(self, keys: jax.Array, env_state: Any, env_action: Any, env_params: Any,
                 vmapped: bool = False):
        """One step of the env batch: ``env.step_batch`` (the same results as
        ``vmap(env.step)``, with the auto-reset computed only for the envs
        that ended) where the env has it, the batch is not sharded and the
        update is not itself ``vmap``ped (a sweep, ``vmapped``); else
        ``vmap(env.step)``."""
        if self.mesh is None and not vmapped:
            return batched_step(self.env, keys, env_state, env_action, env_params)
        return jax.vmap(self.env.step, in_axes=(0, 0, 0, None))(keys, env_state, env_action,
                                                                 env_params)

    def rollout(self, runner: Runner, hp: Hparams, env_params: Any, key: jax.Array,
                vmapped: bool = False):
        """``num_steps`` steps of the env batch under the current policy
        (``vmapped``: see :meth:`env_step`); where rewards are scaled
        (:class:`RewardScalingRunner`), by the spread of the return discounted
        at ``hp``'s discount.

        Returns ``(runner with the new env batch, transitions [T, ...],
        last_value [R])``.
        """
        s = self.static
        params = runner.params
        stats = self.obs_normalizer(runner)

        def body(carry, k):
            (env_state, obs, hidden, prev_action, prev_tobs, start, ep_ret, ep_len, arrived,
             scaling) = carry
            k_act, k_env = jax.random.split(k)
            tobs = self.preprocess(self.to_rows(obs))
            feat = self.features(tobs, prev_tobs, start)
            x = self.net_input(feat, stats, prev_action, start)
            hidden, dist, value = self.step_net(params, hidden, x, start)
            action = networks.sample(self.discrete, dist, k_act)
            logp = networks.log_prob(self.discrete, dist, action)
            env_action = networks.to_env_action(self.discrete, action, self.action_low,
                                                self.action_high)
            obs2, env_state, reward, term, trunc, info = self.env_step(
                jax.random.split(k_env, s.num_envs), env_state, self.to_agents(env_action),
                env_params, vmapped)
            # V(final observation): one more network step from the state after
            # ``obs``, not reset; only read where the episode was truncated.
            no_start = jnp.zeros_like(start)
            feat_final = self.features(self.preprocess(self.to_rows(info["final_observation"])),
                                       tobs, no_start)
            x_final = self.net_input(feat_final, stats, action, no_start)
            _, _, final_value = self.step_net(params, hidden, x_final, no_start)
            out = self.outcome(reward, term, trunc, info, arrived)
            ep_ret = ep_ret + out["reward"]
            ep_len = ep_len + 1
            train_reward, scaling = scale_rewards(out["reward"], out["done"], scaling, hp.gamma)
            tr = Transition(x=x, start=start, action=action, logp=logp, value=value,
                            reward=train_reward, terminated=out["terminated"],
                            truncated=out["truncated"], final_value=final_value,
                            active=~arrived, ep_return=ep_ret, feat=feat,
                            done=out["episode_done"], success=out["success"], ep_length=ep_len,
                            first_arrival=out["first_arrival"], arrivals=out["arrivals"],
                            blocked=out["blocked"])
            done = out["done"]
            carry = (env_state, obs2, hidden, action, tobs, done, jnp.where(done, 0.0, ep_ret),
                     jnp.where(out["episode_done"], 0, ep_len), out["arrived"], scaling)
            return carry, tr

        scaling = ((runner.return_stats, runner.discounted_return)
                   if isinstance(runner, RewardScalingRunner) else None)
        init = (runner.env_state, runner.obs, runner.hidden, runner.prev_action, runner.prev_obs,
                runner.start, runner.ep_return, runner.ep_length, runner.arrived, scaling)
        carry, traj = jax.lax.scan(body, init, jax.random.split(key, s.num_steps))
        (env_state, obs, hidden, prev_action, prev_tobs, start, ep_ret, ep_len, arrived,
         scaling) = carry
        feat_last = self.features(self.preprocess(self.to_rows(obs)), prev_tobs, start)
        x_last = self.net_input(feat_last, stats, prev_action, start)
        _, _, last_value = self.step_net(params, hidden, x_last, start)
        runner = runner.replace(env_state=env_state, obs=obs, hidden=hidden,
                                prev_action=prev_action, prev_obs=prev_tobs, start=start,
                                ep_return=ep_ret, ep_length=ep_len, arrived=arrived)
        if scaling is not None:
            runner = runner.replace(return_stats=scaling[0], discounted_return=scaling[1])
        return runner, traj, last_value

    # ------------------------------------------------------------ loss
    def loss(self, params: Any, mb: dict, hp: Hparams):
        """The PPO loss of a minibatch (means over its active rows, ``mb["mask"]``)."""
        s = self.static
        if s.network.recurrent:
            _, dist, value = networks.apply_network(self.net, params, mb["h0"], mb["x"],
                                                    mb["start"])
        else:
            h = jnp.zeros((mb["x"].shape[0], self.hidden_dim), jnp.float32)
            _, dist, value = networks.apply_network(self.net, params, h, mb["x"][None],
                                                    mb["start"][None])
            dist = jax.tree.map(lambda a: a[0], dist)
            value = value[0]
        mask, eps = mb["mask"], hp.clip_eps
        logp = networks.log_prob(self.discrete, dist, mb["action"])
        ent = masked_mean(networks.entropy(self.discrete, dist), mask)
        log_ratio = logp - mb["logp"]
        ratio = jnp.exp(log_ratio)
        adv = mb["adv"]
        if s.normalize_advantages:
            mean = masked_mean(adv, mask)
            std = jnp.sqrt(masked_mean(jnp.square(adv - mean), mask))
            adv = (adv - mean) / (std + 1e-8)
        pg = -masked_mean(jnp.minimum(
            ratio * adv, jnp.clip(ratio, 1.0 - eps, 1.0 + eps) * adv), mask)
        err = jnp.square(value - mb["target"])
        if s.clip_value:
            v_clip = mb["value"] + jnp.clip(value - mb["value"], -eps, eps)
            err = jnp.maximum(err, jnp.square(v_clip - mb["target"]))
        vf = 0.5 * masked_mean(err, mask)
        total = pg + hp.vf_coef * vf - hp.ent_coef * ent
        approx_kl = masked_mean((ratio - 1.0) - log_ratio, mask)
        clip_frac = masked_mean((jnp.abs(ratio - 1.0) > eps).astype(jnp.float32), mask)
        return total, (pg, vf, ent, approx_kl, clip_frac)

    def minibatches(self, batch: dict, h0: jax.Array, key: jax.Array) -> dict:
        """One epoch's minibatches, along a leading axis.

        ``batch``: arrays [T, R, ...]. Recurrent networks get whole env
        sequences, ``[T, (N / nmb) * A, ...]`` each, with their initial
        states ``h0``; feed-forward networks a shuffle of the ``T x N``
        (step, env) pairs, ``[(T * N / nmb) * A, ...]`` each. Either way an
        env's agents stay together, agent-minor.
        """
        s = self.static
        nmb, agents, n_envs = s.num_minibatches, self.num_agents, s.num_envs
        if s.network.recurrent:
            perm = jax.random.permutation(key, n_envs)
            per = n_envs // nmb

            def split_seq(a):  # [T, N*A, ...] -> [nmb, T, per*A, ...]
                a = jnp.reshape(a, (a.shape[0], n_envs, agents) + a.shape[2:])
                a = jnp.take(a, perm, axis=1)
                a = jnp.reshape(a, (a.shape[0], nmb, per * agents) + a.shape[3:])
                return jnp.swapaxes(a, 0, 1)

            mbs = jax.tree.map(split_seq, batch)
            h = jnp.take(jnp.reshape(h0, (n_envs, agents, -1)), perm, axis=0)
            mbs["h0"] = jnp.reshape(h, (nmb, per * agents, -1))
            return mbs
        total = s.num_steps * n_envs
        perm = jax.random.permutation(key, total)

        def split_flat(a):  # [T, N*A, ...] -> [nmb, T*N/nmb*A, ...]
            a = jnp.reshape(a, (total, agents) + a.shape[2:])
            return jnp.reshape(jnp.take(a, perm, axis=0), (nmb, total // nmb * agents)
                               + a.shape[2:])

        return jax.tree.map(split_flat, batch)

    # ------------------------------------------------------------ update
    def update(self, runner: Runner, hp: Hparams, env_params: Any,
               vmapped: bool = False) -> tuple[Runner, dict]:
        """One PPO update: rollout, GAE, epochs of minibatch gradient steps
        (``vmapped``: the update runs under ``vmap``, see
        :meth:`env_step`). Returns the new runner and scalar metrics
        (:data:`METRIC_NAMES`, and :data:`MULTI_AGENT_METRIC_NAMES` on a
        multi-agent env)."""
        s = self.static
        key = typed_key(runner.key)
        key, k_roll, k_train = jax.random.split(key, 3)
        h0 = runner.hidden
        new_runner, traj, last_value = self.rollout(runner, hp, env_params, k_roll, vmapped)
        adv, target = gae(traj.reward, traj.value, traj.terminated, traj.truncated,
                          traj.final_value, last_value, hp.gamma, hp.gae_lambda)

        tx = adam(hp, s, runner.update, hp.weight_decay)
        mask = traj.active.astype(jnp.float32)
        batch = {"x": traj.x, "start": traj.start, "action": traj.action, "logp": traj.logp,
                 "value": traj.value, "adv": adv, "target": target, "mask": mask}
        grad_fn = jax.value_and_grad(self.loss, has_aux=True)

        def minibatch(carry, mb):
            params, opt_state = carry
            (loss, aux), grads = grad_fn(params, mb, hp)
            updates, opt_state = tx.update(grads, opt_state, params)
            return (optax.apply_updates(params, updates), opt_state), (loss,) + aux

        def epoch(carry, k):
            return jax.lax.scan(minibatch, carry, self.minibatches(batch, h0, k))

        (params, opt_state), losses = jax.lax.scan(
            epoch, (runner.params, runner.opt_state), jax.random.split(k_train, s.update_epochs))
        stats = self.obs_normalizer(runner)
        obs_stats = runner.obs_stats if stats is None else stats.update(traj.feat)
        update = runner.update + 1
        new_runner = new_runner.replace(params=params, opt_state=opt_state, obs_stats=obs_stats,
                                        key=jax.random.key_data(key), update=update)
        loss, pg, vf, ent, kl, cf = (jnp.mean(x) for x in losses)
        metrics = {**self.episode_metrics(traj, update),
                   "loss": loss, "pg_loss": pg, "vf_loss": vf, "entropy": ent, "approx_kl": kl,
                   "clip_frac": cf, "learning_rate": learning_rate_at(hp, s, runner.update),
                   "value_mean": masked_mean(traj.value, mask)}
        return self.constrain(new_runner), metrics

    def episode_metrics(self, traj: Transition, update: jax.Array) -> dict[str, jax.Array]:
        """The episode metrics of one update's rollout ``traj`` (see
        :data:`METRIC_NAMES`, :data:`MULTI_AGENT_METRIC_NAMES`); NaN where
        no episode ended."""
        s = self.static
        done = traj.done.astype(jnp.float32)          # [T, N]
        done_rows = jnp.repeat(done, self.num_agents, axis=1)
        episodes = done.sum()
        denom = jnp.maximum(episodes, 1.0)
        nan = jnp.float32(jnp.nan)

        def per_episode(total):
            return jnp.where(episodes > 0, total / denom, nan)

        env_steps = update.astype(jnp.float32) * (s.num_envs * s.num_steps)
        metrics = {
            "update": update,
            "env_steps": env_steps,
            "episodes": episodes,
            "return_mean": jnp.where(episodes > 0, (done_rows * traj.ep_return).sum()
                                     / jnp.maximum(done_rows.sum(), 1.0), nan),
            "length_mean": per_episode((done * traj.ep_length).sum()),
            "success_rate": per_episode(traj.success.sum()),
        }
        if self.multi_agent:
            first = traj.first_arrival.astype(jnp.float32)
            metrics.update({
                "agent_steps": env_steps * self.num_agents,
                "first_arrival_mean": jnp.where(first.sum() > 0, (first * traj.ep_length).sum()
                                                / jnp.maximum(first.sum(), 1.0), nan),
                "arrivals_mean": per_episode((done * traj.arrivals).sum()),
                "collisions_mean": per_episode(traj.blocked.sum().astype(jnp.float32)),
            })
        return metrics
