"""Shared fixtures: environments are built once per session (every jit
compile costs seconds on the 2-core CI machine) and on small grids."""

from __future__ import annotations

import os

# Compiling dominates this suite on a 2-core CPU: the tests' programs are compiled
# with XLA's backend (LLVM) optimisation level 0, which made the suite about 1.45x
# faster here. Nothing the tests check depends on it (every reference is computed in
# the same process, with the same flags). A run with XLA_FLAGS naming
# --xla_backend_optimization_level keeps the caller's choice, e.g.
# XLA_FLAGS=--xla_backend_optimization_level=2 python -m pytest for XLA's default.
# (Read when JAX starts its backend, so it must be set before any computation.)
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + " --xla_backend_optimization_level=0").strip()

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile(
    "plume_jax",
    max_examples=int(os.environ.get("PLUME_JAX_HYPOTHESIS_EXAMPLES", "20")),
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
