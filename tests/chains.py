"""Independent chains of a stochastic process, compiled as one program (the
statistical tests of the wind models sample them)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax


def run_chains(init: Callable[[jax.Array], Any], advance: Callable[[jax.Array, Any], Any],
               record: Callable[[Any], Any], *, steps: int, chains: int, key: jax.Array) -> Any:
    """``record(state)`` after each of ``steps`` advances of ``chains``
    independent chains, stacked ``[chains, steps, ...]`` (one jitted
    ``vmap`` of a ``lax.scan``). ``init(key) -> state``,
    ``advance(key, state) -> state``; each chain gets its own keys."""

    def chain(k):
        k_init, k_run = jax.random.split(k)

        def body(state, kk):
            state = advance(kk, state)
            return state, record(state)

        return jax.lax.scan(body, init(k_init), jax.random.split(k_run, steps))[1]

    return jax.jit(jax.vmap(chain))(jax.random.split(key, chains))
