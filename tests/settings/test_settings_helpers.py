"""The small helpers of plume_jax.settings that several families share:
``plain`` (what JSON and YAML write) and ``domain_grid`` (the grid of a
component built with one)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from plume_jax.core.errors import ValidationError
from plume_jax.core.types import Grid
from plume_jax.plumes import GaussianPlume, PoissonPlume
from plume_jax.sensors.belief import BeliefSensor
from plume_jax.sensors.position import PositionSensor
from plume_jax.settings import domain_grid, plain, static_config


def test_plain_gives_what_json_writes_and_reads_back():
    value = {1: (np.float32(0.5), np.arange(3, dtype=np.int16)), "name": b"movie",
             "nested": [{"k": (1, 2)}], "plume": GaussianPlume()}
    out = plain(value)
    assert out == {"1": [0.5, [0, 1, 2]], "name": "movie", "nested": [{"k": [1, 2]}],
                   "plume": static_config(GaussianPlume())}
    assert json.loads(json.dumps(out)) == out
    assert type(out["1"][0]) is float and type(out["1"][1][0]) is int


def test_plain_decodes_hdf5_string_arrays_and_numpy_bytes():
    """Regression: the one plain() (merged from three copies) left an HDF5
    attribute that is an array of strings as a list of bytes, which JSON
    cannot hold, so a Rigolli-layout .mat v7.3 movie was refused."""
    out = plain({"units": np.array([b"m", b"s"]), "name": np.bytes_(b"nose")})
    assert out == {"units": ["m", "s"], "name": "nose"}
    assert json.loads(json.dumps(out)) == out


@pytest.mark.parametrize("component, family", [
    (PoissonPlume(), "plume"), (BeliefSensor(), "sensor"), (PositionSensor(), "sensor")])
def test_a_component_made_by_hand_names_its_missing_domain(component, family):
    with pytest.raises(ValidationError, match=rf"{family}\.domain.*{type(component).__name__}"
                                              r"\.build\(values, grid, prefix\)"):
        domain_grid(component, family)


def test_a_built_component_knows_its_grid():
    plume, _, _ = PoissonPlume.build({}, Grid(width=21, height=11), "plume")
    assert domain_grid(plume, "plume") == Grid(width=21, height=11)


def test_the_position_sensor_made_by_hand_says_how_to_build_it():
    from plume_jax.core.types import NoParams
    with pytest.raises(ValidationError, match=r"sensor\.domain.*PositionSensor\.build"):
        PositionSensor().observation_space(NoParams())
