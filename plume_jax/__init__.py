"""plume_jax: a JAX functional environment for odour-plume navigation.

Quick start::

    import jax, plume_jax
    env, params = plume_jax.make("PlumeNav-Gaussian-v0")
    obs, state = env.reset(jax.random.key(0), params)
    obs, state, reward, terminated, truncated, info = env.step(
        jax.random.key(1), state, env.action_ids["move_east"], params)
"""

from plume_jax.envs.plume_env import PlumeEnv
from plume_jax.core.errors import StateError, ValidationError
from plume_jax.envs.config_files import load_config, make_from_config, save_config
from plume_jax.envs.presets import PRESETS, build_env, list_presets, make
from plume_jax.core.types import AgentState, EnvParams, EnvState, Grid
from plume_jax.core.version import __version__
import plume_jax.gym.registration  # noqa: E402,F401  registers plume_jax/<PresetId> with Gymnasium

__all__ = [
    "AgentState",
    "EnvParams",
    "EnvState",
    "Grid",
    "PRESETS",
    "PlumeEnv",
    "StateError",
    "ValidationError",
    "__version__",
    "build_env",
    "list_presets",
    "load_config",
    "make",
    "make_from_config",
    "save_config",
]
