"""PPO whose whole update — rollout, GAE, minibatch epochs — is one pure
function, so any number of updates compiles into one XLA program
(``lax.scan`` over :meth:`PPO.update`) and ``vmap`` turns it into a sweep.

Works with any gymnax-style env whose ``step(key, state, action, params)``
returns ``(obs, state, reward, terminated, truncated, info)``, auto-resets,
and puts the pre-reset observation in ``info["final_observation"]`` (every
``PlumeEnv`` does).

Termination vs truncation
-------------------------
A *terminated* step (the goal was reached: a true terminal state) bootstraps
nothing: ``target = r``. A *truncated* step (the time limit, which is not
part of the state) bootstraps from the value of the observation the episode
was cut at, ``info["final_observation"]``: ``target = r + γ V(s_final)``.
The value of the auto-reset observation that ``step`` returns instead
belongs to a new episode and is never used across the boundary. In both
cases the GAE recursion stops at the boundary. See :func:`gae`.

Recurrent policies
------------------
The GRU state is zeroed at the first observation of every episode (the
``start`` flag, set after every ``terminated or truncated``), both while
acting and when the rollout is replayed in training; training minibatches
are whole env sequences (``num_envs / num_minibatches`` envs each) replayed
from the state the rollout started with.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
from gymnax.environments import spaces as gymnax_spaces

from plume_jax.env import batched_step
from plume_jax.errors import ValidationError
from plume_jax.train import networks
from plume_jax.train.config import NetworkConfig
from plume_jax.train.normalize import ObsStats, normalize, transform


@chex.dataclass(frozen=True)
class Hparams:
    """Algorithm hyperparameters that are array leaves (sweepable under vmap)."""

    learning_rate: jax.Array
    ent_coef: jax.Array
    vf_coef: jax.Array
    gamma: jax.Array
    gae_lambda: jax.Array
    clip_eps: jax.Array
    max_grad_norm: jax.Array

    @classmethod
    def create(cls, **values: float) -> "Hparams":
        return cls(**{f.name: jnp.asarray(values[f.name], jnp.float32)
                      for f in dataclasses.fields(cls)})


@dataclasses.dataclass(frozen=True)
class PPOStatic:
    """Settings compiled into the program (shapes and code paths)."""

    num_envs: int
    num_steps: int
    update_epochs: int
    num_minibatches: int
    num_updates: int
    anneal_lr: bool = True
    clip_value: bool = True
    adam_eps: float = 1e-5
    normalize_obs: bool = False
    normalize_advantages: bool = True
    network: NetworkConfig = NetworkConfig()


@chex.dataclass(frozen=True)
class Runner:
    """Everything training carries from one update to the next.

    Attributes:
        params, opt_state: network parameters and optimiser state.
        obs_stats: running observation statistics (unused unless
            ``normalize_obs``).
        env_state, obs: the env batch (leading axis ``num_envs``).
        hidden: f32[N, H] recurrent state after the last observation.
        prev_action: the last action of each env (network input when
            ``network.prev_action``).
        prev_obs: f32[N, D], the last transformed observation each env acted
            on (for the ``network.obs_delta`` feature).
        start: bool[N], ``obs`` is the first observation of an episode.
        ep_return, ep_length: the running episode's return and length.
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
    key: jax.Array
    update: jax.Array


@chex.dataclass(frozen=True)
class Transition:
    x: jax.Array            # network input (normalised obs [+ previous action])
    start: jax.Array        # first observation of an episode
    action: jax.Array       # the sampled action (normalised for Box actions)
    logp: jax.Array
    value: jax.Array
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    final_value: jax.Array  # V(info["final_observation"])
    success: jax.Array
    ep_return: jax.Array    # return of the episode so far, including this step
    ep_length: jax.Array
    feat: jax.Array         # unnormalised features (for the running statistics)


#: Names of the per-update metrics :meth:`PPO.update` returns.
METRIC_NAMES = ("update", "env_steps", "episodes", "return_mean", "length_mean",
                "success_rate", "loss", "pg_loss", "vf_loss", "entropy", "approx_kl",
                "clip_frac", "learning_rate", "value_mean")


def gae(rewards: jax.Array, values: jax.Array, terminated: jax.Array, truncated: jax.Array,
        final_values: jax.Array, last_value: jax.Array, gamma: Any, lam: Any
        ) -> tuple[jax.Array, jax.Array]:
    """Generalised advantage estimation over a time-major rollout.

    Args:
        rewards, values, terminated, truncated, final_values: [T, ...];
            ``values[t]`` is ``V(obs_t)``; ``final_values[t]`` is the value of
            the observation an episode was cut at (read where ``truncated``).
        last_value: [...], ``V`` of the observation after the last step.
        gamma, lam: discount and GAE λ.

    Returns:
        ``(advantages, value_targets)``, both [T, ...], with
        ``δ_t = r_t + γ·B_t − V_t`` where the bootstrap ``B_t`` is 0 on
        termination, ``final_values[t]`` on truncation and ``V_{t+1}``
        otherwise, and ``A_t = δ_t + γλ·(1 − done_t)·A_{t+1}``.
    """
    done = jnp.logical_or(terminated, truncated)
    next_values = jnp.concatenate([values[1:], last_value[None]], axis=0)
    bootstrap = jnp.where(truncated, final_values, jnp.where(terminated, 0.0, next_values))
    deltas = rewards + gamma * bootstrap - values
    decay = gamma * lam * (1.0 - done.astype(jnp.float32))

    def body(next_adv, inp):
        delta, d = inp
        adv = delta + d * next_adv
        return adv, adv

    _, adv = jax.lax.scan(body, jnp.zeros_like(last_value), (deltas, decay), reverse=True)
    return adv, adv + values


def action_spec(env: Any, env_params: Any) -> tuple[bool, int, Any, Any]:
    """``(discrete, action_dim, low, high)`` of the env's action space."""
    space = env.action_space(env_params)
    if isinstance(space, gymnax_spaces.Discrete):
        return True, int(space.n), None, None
    if isinstance(space, gymnax_spaces.Box):
        shape = tuple(space.shape)
        if len(shape) != 1:
            raise ValidationError.for_parameter("action_space", space,
                                                "Discrete or a 1-D Box (PPO's action spaces)")
        low = np.broadcast_to(np.asarray(space.low, np.float32), shape).copy()
        high = np.broadcast_to(np.asarray(space.high, np.float32), shape).copy()
        if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
            raise ValidationError.for_parameter("action_space", space, "a Box with finite bounds")
        return False, shape[0], low, high
    raise ValidationError.for_parameter("action_space", space, "Discrete or a 1-D Box")


def obs_dim(env: Any, env_params: Any) -> int:
    space = env.observation_space(env_params)
    if not hasattr(space, "shape") or isinstance(space, gymnax_spaces.Dict):
        raise ValidationError.for_parameter(
            "observation_space", space, "an array observation (a Box); dict observations are "
            "not supported by the trainer (use a Box-form composite sensor)")
    return int(np.prod(space.shape, dtype=np.int64))


def _typed_key(key: jax.Array) -> jax.Array:
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        return key
    return jax.random.wrap_key_data(key)


class PPO:
    """PPO for one env structure and one static configuration.

    Args:
        env: a gymnax-style env (static).
        env_params: example params (shapes only; the params actually used
            are passed to :meth:`init` and :meth:`update`).
        static: the compiled-in settings.
        mesh, axis: optional ``jax.sharding.Mesh`` and axis name; the env
            batch (every leaf of ``Runner`` with a leading ``num_envs`` axis)
            is kept sharded along it (see :mod:`plume_jax.train.sharding`).
    """

    def __init__(self, env: Any, env_params: Any, static: PPOStatic, mesh: Any = None,
                 axis: str = "envs"):
        self.env = env
        self.static = static
        self.discrete, self.action_dim, self.action_low, self.action_high = action_spec(
            env, env_params)
        self.obs_dim = obs_dim(env, env_params)
        self.feat_dim = self.obs_dim * (2 if static.network.obs_delta else 1)
        self.net = networks.ActorCritic(static.network, self.action_dim, self.discrete)
        self.in_dim = networks.input_size(self.feat_dim, static.network, self.action_dim)
        self.hidden_dim = networks.hidden_size(static.network)
        self.mesh = mesh
        self.axis = axis
        s = static
        if s.network.recurrent and s.num_envs % s.num_minibatches:
            raise ValidationError.for_parameter("num_minibatches", s.num_minibatches,
                                                f"a divisor of num_envs={s.num_envs}")
        if not s.network.recurrent and (s.num_envs * s.num_steps) % s.num_minibatches:
            raise ValidationError.for_parameter(
                "num_minibatches", s.num_minibatches,
                f"a divisor of num_envs * num_steps = {s.num_envs * s.num_steps}")

    # ------------------------------------------------------------ helpers
    def tx(self, hp: Hparams, lr: Any) -> optax.GradientTransformation:
        return optax.chain(optax.clip_by_global_norm(hp.max_grad_norm),
                           optax.scale_by_adam(eps=self.static.adam_eps),
                           optax.scale(-lr))

    def preprocess(self, obs: jax.Array) -> jax.Array:
        """f32[B, D]: flattened, transformed (not yet normalised) observations."""
        obs = jnp.reshape(jnp.asarray(obs, jnp.float32), (obs.shape[0], -1))
        return transform(obs, self.static.network.obs_transform, self.static.network.log_eps)

    def features(self, tobs: jax.Array, prev_tobs: jax.Array, start: jax.Array) -> jax.Array:
        """f32[B, F]: the transformed observation, followed (``obs_delta``) by
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
        """One time step for a batch: ``(hidden', dist, value)``."""
        hidden, dist, value = self.net.apply(params, hidden, x[None], start[None])
        return hidden, jax.tree.map(lambda a: a[0], dist), value[0]

    def constrain(self, runner: Runner) -> Runner:
        """Keep the env-batch leaves of ``runner`` sharded along the mesh axis."""
        if self.mesh is None:
            return runner
        from plume_jax.train.sharding import constrain_batch

        return runner.replace(**{
            name: constrain_batch(getattr(runner, name), self.mesh, self.axis)
            for name in ("env_state", "obs", "hidden", "prev_action", "prev_obs", "start",
                         "ep_return", "ep_length")})

    # ------------------------------------------------------------ init
    def init(self, key: jax.Array, hp: Hparams, env_params: Any) -> Runner:
        """A fresh runner: network init, env batch reset."""
        s = self.static
        k_net, k_env, k_run = jax.random.split(_typed_key(key), 3)
        params = networks.init_params(self.net, k_net, self.in_dim)
        opt_state = self.tx(hp, hp.learning_rate).init(params)
        obs, env_state = jax.vmap(self.env.reset, in_axes=(0, None))(
            jax.random.split(k_env, s.num_envs), env_params)
        if self.discrete:
            prev_action = jnp.zeros(s.num_envs, jnp.int32)
        else:
            prev_action = jnp.zeros((s.num_envs, self.action_dim), jnp.float32)
        runner = Runner(
            params=params, opt_state=opt_state, obs_stats=ObsStats.create(self.feat_dim),
            env_state=env_state, obs=obs,
            hidden=jnp.zeros((s.num_envs, self.hidden_dim), jnp.float32),
            prev_action=prev_action,
            prev_obs=jnp.zeros((s.num_envs, self.obs_dim), jnp.float32),
            start=jnp.ones(s.num_envs, bool),
            ep_return=jnp.zeros(s.num_envs, jnp.float32),
            ep_length=jnp.zeros(s.num_envs, jnp.int32),
            key=jax.random.key_data(k_run), update=jnp.asarray(0, jnp.int32))
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

    def rollout(self, runner: Runner, env_params: Any, key: jax.Array, vmapped: bool = False):
        """``num_steps`` steps of the env batch under the current policy
        (``vmapped``: see :meth:`env_step`).

        Returns ``(runner with the new env batch, transitions [T, N, ...],
        last_value [N])``.
        """
        s = self.static
        params = runner.params
        stats = runner.obs_stats if s.normalize_obs else None

        def body(carry, k):
            env_state, obs, hidden, prev_action, prev_tobs, start, ep_ret, ep_len = carry
            k_act, k_env = jax.random.split(k)
            tobs = self.preprocess(obs)
            feat = self.features(tobs, prev_tobs, start)
            x = self.net_input(feat, stats, prev_action, start)
            hidden, dist, value = self.step_net(params, hidden, x, start)
            action = networks.sample(self.discrete, dist, k_act)
            logp = networks.log_prob(self.discrete, dist, action)
            env_action = networks.to_env_action(self.discrete, action, self.action_low,
                                         self.action_high)
            obs2, env_state, reward, term, trunc, info = self.env_step(
                jax.random.split(k_env, s.num_envs), env_state, env_action, env_params, vmapped)
            # V(final observation): one more network step from the state after
            # ``obs``, not reset; only read where the episode was truncated.
            no_start = jnp.zeros_like(start)
            feat_final = self.features(self.preprocess(info["final_observation"]), tobs, no_start)
            x_final = self.net_input(feat_final, stats, action, no_start)
            _, _, final_value = self.step_net(params, hidden, x_final, no_start)
            reward = jnp.asarray(reward, jnp.float32)
            term = jnp.asarray(term, bool)
            trunc = jnp.logical_and(jnp.asarray(trunc, bool), jnp.logical_not(term))
            done = term | trunc
            success = term & jnp.asarray(info.get("goal_reached", term), bool)
            ep_ret = ep_ret + reward
            ep_len = ep_len + 1
            tr = Transition(x=x, start=start, action=action, logp=logp, value=value,
                            reward=reward, terminated=term, truncated=trunc,
                            final_value=final_value, success=success, ep_return=ep_ret,
                            ep_length=ep_len, feat=feat)
            carry = (env_state, obs2, hidden, action, tobs, done, jnp.where(done, 0.0, ep_ret),
                     jnp.where(done, 0, ep_len))
            return carry, tr

        init = (runner.env_state, runner.obs, runner.hidden, runner.prev_action, runner.prev_obs,
                runner.start, runner.ep_return, runner.ep_length)
        carry, traj = jax.lax.scan(body, init, jax.random.split(key, s.num_steps))
        env_state, obs, hidden, prev_action, prev_tobs, start, ep_ret, ep_len = carry
        feat_last = self.features(self.preprocess(obs), prev_tobs, start)
        x_last = self.net_input(feat_last, stats, prev_action, start)
        _, _, last_value = self.step_net(params, hidden, x_last, start)
        runner = runner.replace(env_state=env_state, obs=obs, hidden=hidden,
                                prev_action=prev_action, prev_obs=prev_tobs, start=start,
                                ep_return=ep_ret, ep_length=ep_len)
        return runner, traj, last_value

    # ------------------------------------------------------------ loss
    def loss(self, params: Any, mb: dict, hp: Hparams):
        s = self.static
        if s.network.recurrent:
            _, dist, value = self.net.apply(params, mb["h0"], mb["x"], mb["start"])
        else:
            h = jnp.zeros((mb["x"].shape[0], self.hidden_dim), jnp.float32)
            _, dist, value = self.net.apply(params, h, mb["x"][None], mb["start"][None])
            dist = jax.tree.map(lambda a: a[0], dist)
            value = value[0]
        logp = networks.log_prob(self.discrete, dist, mb["action"])
        ent = jnp.mean(networks.entropy(self.discrete, dist))
        log_ratio = logp - mb["logp"]
        ratio = jnp.exp(log_ratio)
        adv = mb["adv"]
        if s.normalize_advantages:
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        pg = -jnp.mean(jnp.minimum(ratio * adv,
                                   jnp.clip(ratio, 1.0 - hp.clip_eps, 1.0 + hp.clip_eps) * adv))
        err = jnp.square(value - mb["target"])
        if s.clip_value:
            v_clip = mb["value"] + jnp.clip(value - mb["value"], -hp.clip_eps, hp.clip_eps)
            err = jnp.maximum(err, jnp.square(v_clip - mb["target"]))
        vf = 0.5 * jnp.mean(err)
        total = pg + hp.vf_coef * vf - hp.ent_coef * ent
        approx_kl = jnp.mean((ratio - 1.0) - log_ratio)
        clip_frac = jnp.mean((jnp.abs(ratio - 1.0) > hp.clip_eps).astype(jnp.float32))
        return total, (pg, vf, ent, approx_kl, clip_frac)

    # ------------------------------------------------------------ update
    def update(self, runner: Runner, hp: Hparams, env_params: Any,
               vmapped: bool = False) -> tuple[Runner, dict]:
        """One PPO update: rollout, GAE, ``update_epochs`` x ``num_minibatches``
        gradient steps (``vmapped``: the update runs under ``vmap``, see
        :meth:`env_step`). Returns the new runner and scalar metrics
        (:data:`METRIC_NAMES`)."""
        s = self.static
        key = _typed_key(runner.key)
        key, k_roll, k_train = jax.random.split(key, 3)
        h0 = runner.hidden
        new_runner, traj, last_value = self.rollout(runner, env_params, k_roll, vmapped)
        adv, target = gae(traj.reward, traj.value, traj.terminated, traj.truncated,
                          traj.final_value, last_value, hp.gamma, hp.gae_lambda)

        frac = 1.0 - runner.update.astype(jnp.float32) / s.num_updates
        lr = hp.learning_rate * frac if s.anneal_lr else hp.learning_rate
        tx = self.tx(hp, lr)
        batch = {"x": traj.x, "start": traj.start, "action": traj.action, "logp": traj.logp,
                 "value": traj.value, "adv": adv, "target": target}
        nmb = s.num_minibatches
        grad_fn = jax.value_and_grad(self.loss, has_aux=True)

        def minibatch(carry, mb):
            params, opt_state = carry
            (loss, aux), grads = grad_fn(params, mb, hp)
            updates, opt_state = tx.update(grads, opt_state, params)
            return (optax.apply_updates(params, updates), opt_state), (loss,) + aux

        def epoch(carry, k):
            if s.network.recurrent:
                perm = jax.random.permutation(k, s.num_envs)
                per = s.num_envs // nmb

                def split_seq(a):  # [T, N, ...] -> [nmb, T, N/nmb, ...]
                    a = jnp.take(a, perm, axis=1)
                    a = a.reshape(a.shape[0], nmb, per, *a.shape[2:])
                    return jnp.swapaxes(a, 0, 1)

                mbs = jax.tree.map(split_seq, batch)
                mbs["h0"] = jnp.take(h0, perm, axis=0).reshape(nmb, per, -1)
            else:
                total = s.num_steps * s.num_envs
                perm = jax.random.permutation(k, total)

                def split_flat(a):  # [T, N, ...] -> [nmb, T*N/nmb, ...]
                    a = a.reshape(total, *a.shape[2:])
                    return jnp.take(a, perm, axis=0).reshape(nmb, total // nmb, *a.shape[1:])

                mbs = jax.tree.map(split_flat, batch)
            return jax.lax.scan(minibatch, carry, mbs)

        (params, opt_state), losses = jax.lax.scan(
            epoch, (runner.params, runner.opt_state), jax.random.split(k_train, s.update_epochs))
        obs_stats = runner.obs_stats.update(traj.feat) if s.normalize_obs else runner.obs_stats
        update = runner.update + 1
        new_runner = new_runner.replace(params=params, opt_state=opt_state, obs_stats=obs_stats,
                                        key=jax.random.key_data(key), update=update)

        done = (traj.terminated | traj.truncated).astype(jnp.float32)
        episodes = done.sum()
        denom = jnp.maximum(episodes, 1.0)
        nan = jnp.float32(jnp.nan)
        loss, pg, vf, ent, kl, cf = (jnp.mean(x) for x in losses)
        metrics = {
            "update": update,
            "env_steps": update.astype(jnp.float32) * (s.num_envs * s.num_steps),
            "episodes": episodes,
            "return_mean": jnp.where(episodes > 0, (done * traj.ep_return).sum() / denom, nan),
            "length_mean": jnp.where(episodes > 0, (done * traj.ep_length).sum() / denom, nan),
            "success_rate": jnp.where(episodes > 0, traj.success.sum() / denom, nan),
            "loss": loss, "pg_loss": pg, "vf_loss": vf, "entropy": ent, "approx_kl": kl,
            "clip_frac": cf, "learning_rate": jnp.asarray(lr, jnp.float32),
            "value_mean": traj.value.mean(),
        }
        return self.constrain(new_runner), metrics

    # ------------------------------------------------------------ many updates
    def run(self, runner: Runner, hp: Hparams, env_params: Any, num_updates: int,
            callback: Callable | None = None, log_every: int = 1, batched: bool = False,
            count: Any = None):
        """``num_updates`` updates in one ``lax.scan`` (jit it, with
        ``num_updates`` static). With ``batched``, every argument carries a
        leading sweep axis and the update is ``vmap``ped over it.

        ``count`` (optional, an i32[] that may be traced): run only the first
        ``count`` (<= ``num_updates``) updates; the later steps of the scan
        leave the runner as it is (``lax.cond``) and their metrics rows are
        filler (NaN; 0 for integers). One compiled program then serves every
        chunk length, and splitting a run into chunks of any lengths gives
        bit-for-bit the results of one call (the update is the same
        computation; the runner carries the PRNG key and the update count).

        ``callback(metrics)`` (host side, via ``jax.debug.callback``) gets the
        metrics of every ``log_every``-th update and of the last update of the
        run; it does not break jit and costs nothing on other updates.
        Returns ``(runner, metrics)`` with metrics stacked over updates.
        """
        update = jax.vmap(functools.partial(self.update, vmapped=True)) if batched \
            else self.update
        return scan_updates(lambda r: update(r, hp, env_params), runner,
                            num_updates=num_updates, last=self.static.num_updates,
                            callback=callback, log_every=log_every, batched=batched,
                            count=count)


def scan_updates(update: Callable, runner: Any, *, num_updates: int, last: int,
                 callback: Callable | None, log_every: int, batched: bool = False,
                 count: Any = None):
    """``update(runner) -> (runner, metrics)`` applied ``num_updates`` times in
    one ``lax.scan``: the loop of ``PPO.run`` (see there for ``callback``,
    ``log_every`` and ``count``), shared by every training algorithm.
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


def resolve_gamma(env: Any, env_params: Any, gamma: float | None) -> float:
    """The training discount: ``gamma`` if given, else the reward's shaping
    discount (``env.reward.discount``) when it is below 1, else 0.99.

    Raises ``ValidationError`` when ``gamma`` contradicts a potential-based
    shaping reward's discount (training with another γ would change the
    optimal policy, Ng et al. 1999)."""
    reward = getattr(env, "reward", None)
    shaped = None
    if reward is not None and hasattr(reward, "discount"):
        d = float(np.asarray(reward.discount(env_params.reward)))
        shaped = d if d < 1.0 else None
    if gamma is None:
        return shaped if shaped is not None else 0.99
    if shaped is not None and abs(gamma - shaped) > 1e-6:
        raise ValidationError.for_parameter(
            "algo.gamma", gamma,
            f"the shaping reward's gamma {shaped} (or null to use it): potential-based shaping "
            "keeps the optimal policy only under its own discount")
    return float(gamma)
