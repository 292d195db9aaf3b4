"""The contracts hold whichever door the user came in by (issue 13): through
``gymnasium.make`` and ``make_vec`` as on ``PlumeGymEnv``, for seeds, reset
options, render sizes, actions beyond int32 and async vectorisation; plus a
stateful test that drives ``gymnasium.make``'s env with random call
sequences. Each regression test is named after what broke."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import gymnasium
import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import plume_jax
from plume_jax import StateError, ValidationError
from plume_jax.gym import PlumeGymEnv, PlumeVectorEnv
from plume_jax.gym import _common as common
from plume_jax.render.frames import MAX_FRAME_PIXELS, render_frame

GAUSSIAN = "plume_jax/PlumeNav-Gaussian-v0"
SMALL = {"grid_size": [16, 16], "sigma": 4.0, "goal_radius": 1.5}


def make(**kwargs):
    return gymnasium.make(GAUSSIAN, **{**SMALL, **kwargs})


# ------------------------------------------------------------ 13.1 lifecycle
def test_step_before_reset_through_gymnasium_make_raises_state_error_not_reset_needed():
    env = make()
    with pytest.raises(StateError, match="before reset"):
        env.step(0)


def test_render_before_reset_through_gymnasium_make_raises_state_error():
    env = make(render_mode="rgb_array")
    with pytest.raises(StateError, match="before reset"):
        env.render()


# ----------------------------------------------------------- 13.2 one limit
def test_max_episode_steps_truncation_moves_the_lifecycle_to_truncated():
    env = make(max_episode_steps=3)
    env.reset(seed=0, options={"start_position": (0, 0)})
    flags = [env.step(0)[2:4] for _ in range(3)]
    assert flags == [(False, False), (False, False), (False, True)]
    assert env.unwrapped.lifecycle_state.name == "TRUNCATED"
    with pytest.raises(StateError, match="TRUNCATED"):
        env.step(0)


def test_max_episode_steps_alone_sets_the_env_limit_longer_or_shorter():
    assert int(make(max_episode_steps=1500).unwrapped.params.max_steps) == 1500
    assert int(make(max_episode_steps=7).unwrapped.params.max_steps) == 7
    assert make(max_episode_steps=1500).spec.max_episode_steps == 1500


def test_max_steps_beyond_the_registered_time_limit_is_refused_not_cut_silently():
    with pytest.raises(ValidationError, match=r"max_steps=2000.*max_episode_steps=1000"):
        make(max_steps=2000)
    env = make(max_steps=2000, max_episode_steps=2000)  # both: one limit
    assert int(env.unwrapped.params.max_steps) == 2000 and env.spec.max_episode_steps == 2000


def test_contradicting_max_steps_and_max_episode_steps_are_refused():
    with pytest.raises(ValidationError, match=r"max_episode_steps=5.*max_steps=9"):
        make(max_steps=9, max_episode_steps=5)


def test_make_vec_takes_max_steps_or_max_episode_steps_as_one_limit():
    def limit(**kwargs):
        venv = gymnasium.make_vec(GAUSSIAN, num_envs=2, **{**SMALL, **kwargs})
        return int(venv.params.max_steps)

    assert limit(max_steps=2000) == 2000
    assert limit(max_episode_steps=9) == 9
    with pytest.raises(ValidationError, match="max_episode_steps"):
        limit(max_steps=9, max_episode_steps=5)


def test_gymnasium_make_gives_an_entry_point_no_episode_limit():
    """Why the entry point reads ``gymnasium.make``'s arguments on the call
    stack (plume_jax.gym.registration's docstring): ``make`` hands
    ``max_episode_steps`` only to the ``TimeLimit`` it wraps around the env
    after the entry point returns, and the env's own spec says None. When
    this fails, gymnasium tells the entry point the limit: use that instead."""
    seen = {}

    class Probe(gymnasium.Env):
        observation_space = gymnasium.spaces.Discrete(2)
        action_space = gymnasium.spaces.Discrete(2)

        def __init__(self, **kwargs):
            seen.update(kwargs)

    spec = gymnasium.envs.registration.EnvSpec("PlumeJaxLimitProbe-v0", entry_point=Probe,
                                               max_episode_steps=10, order_enforce=False,
                                               disable_env_checker=True)
    env = gymnasium.make(spec, max_episode_steps=5)
    assert env.spec.max_episode_steps == 5  # the TimeLimit's
    assert seen == {} and env.unwrapped.spec.max_episode_steps is None


# ------------------------------------------------------------------ 13.3 seeds
def test_seed_key_uses_every_bit_and_keeps_seeds_below_2_32():
    for seed in (0, 7, 2**31 + 5, 2**32 - 1):
        np.testing.assert_array_equal(jax.random.key_data(common.seed_key(seed)),
                                      jax.random.key_data(jax.random.key(seed)))
    want = jax.random.fold_in(jax.random.key(3), 2**8)  # low 32 bits: 3, high: 2**8
    np.testing.assert_array_equal(jax.random.key_data(common.seed_key(2**40 + 3)),
                                  jax.random.key_data(want))
    keys = common.keys_from_seeds([5, 2**32 + 5])
    assert not np.array_equal(jax.random.key_data(keys[0]), jax.random.key_data(keys[1]))


def test_seeds_s_and_s_plus_2_32_give_different_episodes():
    starts = {}
    for seed in (3, 3 + 2**32, 3 + 2**40, 2**63 - 1):
        env = make()
        obs, info = env.reset(seed=seed)
        starts[seed] = (tuple(obs), info["agent_xy"], env.step(1)[4]["agent_xy"])
        assert info["seed"] == seed
    assert len(set(starts.values())) == len(starts)
    venv = gymnasium.make_vec(GAUSSIAN, num_envs=2, **SMALL)
    venv_obs, _ = venv.reset(seed=[3, 3 + 2**32])
    assert tuple(venv_obs[0]) == starts[3][0] and tuple(venv_obs[1]) == starts[3 + 2**32][0]


@pytest.mark.parametrize("seed", [-1, 2**63, 2**64, 1.5, "3", True, np.float64(2.0)])
def test_seeds_outside_the_honoured_range_are_refused(seed):
    env = make()
    with pytest.raises(ValidationError, match=r"seed.*2\*\*63"):
        env.reset(seed=seed)
    assert env.unwrapped.lifecycle_state.name == "CREATED"


# --------------------------------------------------------------- 13.6 options
@pytest.fixture(scope="module")
def oriented():
    return plume_jax.make("PlumeNav-GaussianOriented-v0", grid_size=[16, 16], sigma=4.0,
                          goal_radius=1.5)


def test_start_heading_1e300_is_wrapped_and_the_env_keeps_stepping(oriented):
    genv = PlumeGymEnv(*oriented)
    genv.reset(seed=0, options={"start_position": (2, 2), "start_heading": 1e300})
    heading = float(genv.env_state.agent.heading)
    assert np.isfinite(heading) and -np.pi <= heading <= np.pi
    for _ in range(3):
        obs, *_ = genv.step(genv.action_ids["forward"])
        assert np.all(np.isfinite(obs))
    genv.reset(seed=0, options={"start_position": (2, 2), "start_heading": 2 * np.pi + 0.5})
    assert float(genv.env_state.agent.heading) == pytest.approx(2 * np.pi + 0.5)  # as given


@pytest.mark.parametrize("position", [("1", "2"), (True, 2), (1, np.bool_(False)), {1, 2},
                                      (1, 2, 3), (np.inf, 2), (2, 99), "12", None, b"12"])
def test_bad_start_positions_are_refused_and_change_nothing(oriented, position):
    tried, clean = PlumeGymEnv(*oriented), PlumeGymEnv(*oriented)
    tried.reset(seed=4)
    clean.reset(seed=4)
    state = tried.env_state
    with pytest.raises(ValidationError, match="start_position"):
        tried.reset(options={"start_position": position})
    assert tried.env_state is state
    assert tried.reset()[1] == clean.reset()[1]


@pytest.mark.parametrize("heading", [np.nan, np.inf, "1", True, [1.0]])
def test_bad_start_headings_are_refused(oriented, heading):
    genv = PlumeGymEnv(*oriented)
    with pytest.raises(ValidationError, match="start_heading"):
        genv.reset(seed=0, options={"start_position": (2, 2), "start_heading": heading})


# ---------------------------------------------------------------- 13.7 render
def test_render_refuses_frames_over_the_limit_before_allocating():
    big = {**SMALL, "grid_size": [1100, 1100]}  # 4400 x 4400 pixels at the default scale 4
    assert 4400**2 > MAX_FRAME_PIXELS
    with pytest.raises(ValidationError, match=r"render_scale=4.*MAX_FRAME_PIXELS"):
        gymnasium.make(GAUSSIAN, render_mode="rgb_array", **big)
    env = gymnasium.make(GAUSSIAN, **big)  # no render mode: refused when asked to draw
    env.reset(seed=0)
    with pytest.raises(ValidationError, match="render_scale"):
        env.unwrapped.render("rgb_array")
    assert env.step(1)[0].shape == (1,)  # the env itself is unaffected
    core_env, params = plume_jax.make("PlumeNav-Gaussian-v0", **big)
    _, state = core_env.reset(jax.random.key(0), params)
    with pytest.raises(ValidationError, match="scale=4"):
        render_frame(core_env, state.plume, state.agent, params, scale=4)


def test_vector_render_refuses_a_batch_of_frames_over_the_limit():
    core = plume_jax.make("PlumeNav-Gaussian-v0", grid_size=[256, 256])  # 512 x 512 at scale 2
    assert 64 * 512**2 == MAX_FRAME_PIXELS  # 64 frames: at the limit
    PlumeVectorEnv(*core, num_envs=64, render_mode="rgb_array", render_scale=2)
    with pytest.raises(ValidationError, match="times 65 frames"):
        PlumeVectorEnv(*core, num_envs=65, render_mode="rgb_array", render_scale=2)


# ------------------------------------------------- 13.9 actions beyond int32
@pytest.mark.parametrize("action", [np.int64(2**31 + 1), 2**40, np.uint64(2**63), -(2**31) - 1])
def test_int64_action_beyond_int32_is_refused_by_the_gym_layer(action):
    env = make()
    env.reset(seed=0)
    with pytest.raises(ValidationError, match="action"):
        env.step(action)
    venv = gymnasium.make_vec(GAUSSIAN, num_envs=2, **SMALL)
    venv.reset(seed=0)
    with pytest.raises(ValidationError, match="actions"):
        venv.step(np.array([1, action]))


# ----------------------------------------------------------- 13.18 async
def test_async_make_vec_is_refused_with_a_clear_error_instead_of_hanging():
    code = textwrap.dedent(f"""
        import gymnasium, plume_jax
        try:
            gymnasium.make_vec({GAUSSIAN!r}, num_envs=2, vectorization_mode="async",
                               grid_size=[16, 16])
        except plume_jax.StateError as exc:
            print("refused:", exc)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert "refused:" in out.stdout and "make_vec(id, num_envs=N)" in out.stdout, out.stderr
    assert "spawn" in out.stdout


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX fork")
@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")
def test_a_process_forked_after_jax_started_refuses_to_build_an_env():
    """The fork refusal is an ``os.register_at_fork`` hook (it compared
    process ids before): the forked child refuses, the parent still builds."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no JAX work, only the entry point's refusal
        os.close(read)
        try:
            gymnasium.make(GAUSSIAN, **SMALL)
            message = b"built"
        except StateError as exc:
            message = str(exc).encode()
        except BaseException as exc:  # noqa: BLE001  (report anything else)
            message = repr(exc).encode()
        os.write(write, message[:4096])
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        got = pipe.read().decode()
    os.waitpid(pid, 0)
    assert got.startswith("plume_jax cannot build an environment in a process forked after JAX "
                          "started"), got
    assert "spawn" in got
    gymnasium.make(GAUSSIAN, **SMALL).close()  # the parent is not marked


@pytest.mark.slow
def test_async_make_vec_with_a_spawn_context_works(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(f"""
        import gymnasium, numpy as np, plume_jax
        if __name__ == "__main__":
            venv = gymnasium.make_vec({GAUSSIAN!r}, num_envs=2, vectorization_mode="async",
                                      vector_kwargs={{"context": "spawn"}}, grid_size=[16, 16],
                                      sigma=4.0, goal_radius=1.5)
            obs, info = venv.reset(seed=0)
            venv.step(np.array([1, 2]))
            print("obs", obs.ravel().tolist())
            venv.close()
    """))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    want = [float(PlumeGymEnv(*plume_jax.make("PlumeNav-Gaussian-v0", **SMALL)).reset(
        seed=s)[0][0]) for s in (0, 1)]
    got = [float(v) for v in out.stdout.split("obs", 1)[1].strip(" []\n").split(",")]
    np.testing.assert_allclose(got, want, rtol=1e-6)


# -------------------------------------------------------------- PettingZoo
@pytest.fixture(scope="module")
def parallel_env():
    pytest.importorskip("pettingzoo")
    from plume_jax.gym.pettingzoo_env import PlumeParallelEnv

    env, _ = plume_jax.make("PlumeNav-Gaussian-v0", **SMALL, max_steps=20, num_agents=2)
    return PlumeParallelEnv(env)


@pytest.mark.parametrize("seed", [-1, 2**63, 1.5, "3", True])
def test_pettingzoo_seed_check_is_the_common_one(parallel_env, seed):
    with pytest.raises(ValidationError, match=r"seed.*2\*\*63"):
        parallel_env.reset(seed=seed)


def test_pettingzoo_seeds_above_2_32_reach_the_key(parallel_env):
    a = parallel_env.reset(seed=5)[0]
    b = parallel_env.reset(seed=5 + 2**32)[0]
    assert any(not np.array_equal(a[n], b[n]) for n in a)


@pytest.mark.parametrize("actions", [[1, 2], 1, "agent_0", None, np.array([1, 2])])
def test_pettingzoo_non_dict_actions_get_a_validation_error(parallel_env, actions):
    parallel_env.reset(seed=0)
    state = parallel_env.state().copy()
    with pytest.raises(ValidationError, match="actions"):
        parallel_env.step(actions)
    np.testing.assert_array_equal(parallel_env.state(), state)


@pytest.mark.parametrize("action", [np.int64(2**31 + 1), 1.5, "north", [1]])
def test_pettingzoo_bad_actions_name_the_agent(parallel_env, action):
    parallel_env.reset(seed=0)
    with pytest.raises(ValidationError, match="agent_1"):
        parallel_env.step({"agent_0": 1, "agent_1": action})


# ------------------------------------------------------ stateful: any order
GOOD_SEEDS = st.one_of(st.integers(0, 40), st.integers(2**32, 2**32 + 3),
                       st.just(2**63 - 1))
BAD_SEEDS = st.sampled_from([-1, 2**63, 1.5, "0", True])
GOOD_OPTIONS = st.one_of(st.none(), st.just({}), st.fixed_dictionaries(
    {"start_position": st.tuples(st.integers(0, 3), st.integers(0, 15))},
    optional={"start_heading": st.floats(-1e300, 1e300, allow_nan=False)}))
BAD_OPTIONS = st.sampled_from([
    {"start_position": (99, 0)}, {"start_position": ("1", "2")}, {"start_position": (True, 2)},
    {"start_position": (7, 7)},  # inside the goal region around (7, 7)
    {"start_heading": 1.0}, {"nope": 1}, [("start_position", (0, 0))],
    {"start_position": (0, 0), "start_heading": float("nan")}])
GOOD_ACTIONS = st.integers(0, 4)
BAD_ACTIONS = st.sampled_from([5, -1, 2**40, np.int64(2**31 + 3), 1.5, "north", None, [1]])


@settings(max_examples=25, stateful_step_count=30, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
class GymnasiumMakeMachine(RuleBasedStateMachine):
    """Random calls on an env from ``gymnasium.make``: each either succeeds
    or raises ``ValidationError``/``StateError``; a rejected call changes
    nothing, so a twin env that only ever sees the accepted calls returns
    the same results for every later call."""

    @initialize()
    def build(self):
        kwargs = {**SMALL, "max_steps": 6, "render_mode": "rgb_array", "render_scale": 1}
        self.env = gymnasium.make(GAUSSIAN, **kwargs)
        self.twin = gymnasium.make(GAUSSIAN, **kwargs)

    def both(self, call):
        """Run ``call`` on the env; if it is accepted, on the twin too, and
        compare; if it raises, it must be one of the two plume_jax errors."""
        try:
            got = call(self.env)
        except (ValidationError, StateError) as exc:
            return exc
        want = call(self.twin)
        assert_same_result(got, want)
        return got

    @rule(seed=st.one_of(st.none(), GOOD_SEEDS, BAD_SEEDS),
          options=st.one_of(GOOD_OPTIONS, BAD_OPTIONS))
    def reset(self, seed, options):
        try:
            got = self.env.reset(seed=seed, options=options)
        except (ValidationError, StateError):
            return
        # a first reset without a seed draws one: the twin takes the reported one
        twin_seed = got[1]["seed"] if seed is None and got[1]["seed"] is not None else seed
        assert_same_result(got, self.twin.reset(seed=twin_seed, options=options))

    @rule(action=st.one_of(GOOD_ACTIONS, BAD_ACTIONS))
    def step(self, action):
        self.both(lambda env: env.step(action))

    @rule()
    def render(self):
        self.both(lambda env: env.render())

    @rule()
    def close(self):
        self.env.close()
        self.twin.close()

    @invariant()
    def same_lifecycle(self):
        if hasattr(self, "env"):
            assert self.env.unwrapped.lifecycle_state == self.twin.unwrapped.lifecycle_state


def assert_same_result(got, want):
    if isinstance(got, np.ndarray):
        np.testing.assert_array_equal(got, want)
        return
    assert len(got) == len(want)
    for a, b in zip(got, want):
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, b)
        else:
            assert a == b


TestGymnasiumMakeMachine = GymnasiumMakeMachine.TestCase
