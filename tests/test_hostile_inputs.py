"""Inputs that used to crash with a traceback instead of a one-line error
(issue 42, items 7, 12 and 14): integers too large for a float in the
settings checker, YAML 1.1 forms and duplicate keys in configs and
``--set`` values, and user algorithms that cannot be used."""

from __future__ import annotations

import pytest

from plume_jax import ValidationError
from plume_jax.settings import Angle, real
from plume_jax.settings.checks import grid_position
from plume_jax.types import Grid

HUGE = 10**400  # float(HUGE) raises OverflowError


# -- issue 42.7: integers too large for a float ---------------------------------

def test_an_integer_too_large_for_a_float_is_refused_by_the_real_checker_not_overflow():
    with pytest.raises(ValidationError, match=r"^x=<int of \d+ bits> is invalid: expected a "
                       r"finite real number"):
        real(low=0.0)("x", HUGE, None)
    with pytest.raises(ValidationError, match="finite real number of radians"):
        Angle()("heading", -HUGE, None)
    with pytest.raises(ValidationError, match=r"an \(x, y\) pair"):
        grid_position()("start.position", [HUGE, 1], Grid(8, 8))


def test_a_400_digit_learning_rate_given_with_set_is_a_one_line_error():
    from plume_jax.cli.common import parse_overrides
    from plume_jax.train.config import load_train_config

    overrides = parse_overrides(["algo.learning_rate=" + "9" * 400])
    with pytest.raises(ValidationError, match=r"algo\.learning_rate=<int of \d+ bits> is "
                       r"invalid") as caught:
        load_train_config("configs/train_gaussian.yaml", overrides)
    assert "\n" not in str(caught.value)
