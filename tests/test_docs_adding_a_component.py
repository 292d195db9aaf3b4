"""docs/adding_a_component.md runs as written: its Python blocks, executed
in order in one namespace, add a plume and a sensor, register them, and
check them against their interfaces. The registry tables are restored
afterwards, so the rest of the suite never sees the two classes."""

from __future__ import annotations

import pathlib
import re

from plume_jax.registry import COMPONENTS

PAGE = pathlib.Path(__file__).resolve().parents[1] / "docs" / "adding_a_component.md"


def test_adding_a_component_page_runs_and_leaves_the_tables_as_they_were():
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)
    assert len(blocks) >= 5
    before = {slot: dict(table) for slot, table in COMPONENTS.items()}
    namespace: dict = {}
    try:
        for i, block in enumerate(blocks):
            exec(compile(block, f"{PAGE.name} block {i}", "exec"), namespace)
        assert COMPONENTS["plume"]["exponential"] is namespace["ExponentialPlume"]
        assert COMPONENTS["sensor"]["gradient"] is namespace["GradientSensor"]
    finally:
        for slot, table in COMPONENTS.items():
            table.clear()
            table.update(before[slot])
    assert {slot: dict(table) for slot, table in COMPONENTS.items()} == before
