"""One comparison for "the same results up to float rounding" (two programs
that compute the same thing, e.g. ``env.step_batch`` and ``vmap(env.step)``)."""

from __future__ import annotations

import jax
import numpy as np


def _host(x):
    if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
        x = jax.random.key_data(x)
    return np.asarray(x)


def assert_same_up_to_rounding(got, want, rtol=1e-5, atol=1e-6):
    """Every leaf of ``got`` equals ``want``'s: exactly for integers, bools
    and PRNG keys (compared by their key data), within ``rtol``/``atol``
    for floats."""
    got_leaves, want_leaves = jax.tree.leaves(got), jax.tree.leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves):
        g, w = _host(g), _host(w)
        if np.issubdtype(w.dtype, np.floating):
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(g, w)
