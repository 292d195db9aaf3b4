"""docs/adding_a_component.md runs as written: its Python blocks (tagged
``test=adding-a-component``), executed in order in one namespace, add a
plume and a sensor, register them, and check them against their
interfaces. The registry tables are restored afterwards, so the rest of the
suite never sees the two classes (which is why the page's blocks are not
run by ``tests/docs/test_docs.py`` with the untagged ones)."""

from __future__ import annotations

from tests.docs_blocks import tagged

from plume_jax.envs.presets import COMPONENTS


def test_adding_a_component_page_runs_and_leaves_the_tables_as_they_were(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    blocks = tagged("adding-a-component")
    assert len(blocks) >= 5
    before = {slot: dict(table) for slot, table in COMPONENTS.items()}
    namespace: dict = {"__name__": "__docs__"}
    try:
        for i, block in enumerate(blocks):
            # dont_inherit: run as written, without this file's ``from __future__ import``
            code = compile(block, f"docs/adding_a_component.md block {i}", "exec",
                           dont_inherit=True)
            exec(code, namespace)
        assert COMPONENTS["plume"]["exponential"] is namespace["ExponentialPlume"]
        assert COMPONENTS["sensor"]["gradient"] is namespace["GradientSensor"]
    finally:
        for slot, table in COMPONENTS.items():
            table.clear()
            table.update(before[slot])
    assert {slot: dict(table) for slot, table in COMPONENTS.items()} == before
