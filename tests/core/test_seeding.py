"""One seed rule at every door (plume_jax.core.seeding): integers in [0, 2**63),
every bit reaching the key, small seeds keeping jax.random.key's streams."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from plume_jax import ValidationError
from plume_jax.core.seeding import check_seed, keys_from_seeds, seed_key


def _data(key):
    return np.asarray(jax.random.key_data(key))


def test_seeds_below_2_32_keep_the_key_of_jax_random_key():
    for seed in (0, 1, 12345, 2**32 - 1):
        assert (_data(seed_key(seed)) == _data(jax.random.key(seed))).all()


def test_seed_and_seed_plus_2_32_no_longer_share_a_key():
    """jax.random.key keeps only a seed's low 32 bits: s and s + 2**32 used to
    start the same episodes."""
    assert (_data(jax.random.key(7)) == _data(jax.random.key(7 + 2**32))).all()
    assert not (_data(seed_key(7)) == _data(seed_key(7 + 2**32))).all()
    assert not (_data(seed_key(7 + 2**32)) == _data(seed_key(7 + 2**33))).all()


def test_stacked_keys_equal_one_key_per_seed():
    seeds = [3, 2**32 + 3, 2**62]
    stacked = keys_from_seeds(seeds)
    for i, seed in enumerate(seeds):
        assert (_data(stacked[i]) == _data(seed_key(seed))).all()


@pytest.mark.parametrize("bad", [-1, 2**63, 1.0, True, "3", None])
def test_seeds_outside_the_honoured_range_are_refused(bad):
    with pytest.raises(ValidationError, match="2\\*\\*63"):
        check_seed(bad, "--seed", none_ok=False)


def test_evaluate_uses_every_bit_of_the_scenario_seed():
    from plume_jax.evaluate.scenario import validate_seed

    assert validate_seed(2**40 + 5) == 2**40 + 5
    with pytest.raises(ValidationError, match="seed"):
        validate_seed(2**63)
