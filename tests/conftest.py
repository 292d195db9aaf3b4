"""Shared fixtures: environments are built once per session (every jit
compile costs seconds on the 2-core CI machine) and on small grids."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "plume_jax",
    max_examples=int(os.environ.get("PLUME_JAX_HYPOTHESIS_EXAMPLES", "30")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile("plume_jax")

SMALL_OVERRIDES = {"grid_size": [32, 32], "sigma": 6.0, "goal_radius": 2.0, "max_steps": 60}


@pytest.fixture(scope="session")
def small_env():
    """``(env, params)``: the Gaussian preset on a 32x32 grid, 60 steps."""
    import plume_jax

    return plume_jax.make("PlumeNav-Gaussian-v0", **SMALL_OVERRIDES)


@pytest.fixture(scope="session")
def default_env():
    """``(env, params)``: ``PlumeNav-Gaussian-v0`` with its defaults."""
    import plume_jax

    return plume_jax.make("PlumeNav-Gaussian-v0")
