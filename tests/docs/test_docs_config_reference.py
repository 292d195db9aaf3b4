"""docs/config_reference.md is generated from the settings declarations
(scripts/docs/settings_reference.py) and must match what the generator writes now:
a new or changed setting without regenerated docs fails here."""

from __future__ import annotations

from tests.docs_blocks import ROOT

from scripts.docs import settings_reference


def test_committed_reference_is_what_the_generator_writes():
    committed = (ROOT / "docs" / "config_reference.md").read_text(encoding="utf-8")
    assert committed == settings_reference.render(), (
        "docs/config_reference.md is stale: run `python scripts/docs/settings_reference.py` "
        "and commit the result")


def test_reference_lists_every_declared_key():
    from plume_jax.evaluate.scenario import SCENARIO_SCHEMA
    from plume_jax.envs.presets import COMPONENTS
    from plume_jax.train.config import schemas

    text = settings_reference.render()
    for section, schema in schemas().items():
        assert f"### `{section}`" in text
        for key, setting in schema.items():
            assert f"| `{key}` |" in text and setting.doc, f"{section}.{key} has no doc line"
    for section, schema in SCENARIO_SCHEMA.items():
        for key, setting in schema.items():
            assert f"| `{key}` |" in text and setting.doc, f"scenario {section}.{key}: no doc"
    for slot, table in COMPONENTS.items():
        for name, cls in table.items():
            assert f"#### `{slot}: {name}` ({cls.__name__})" in text
            for key in cls.SETTINGS:
                assert f"| `{key}` |" in text


def test_check_mode_flags_a_stale_file(tmp_path):
    stale = tmp_path / "config_reference.md"
    stale.write_text("# old\n")
    assert settings_reference.main(["--check", "--out", str(stale)]) == 1
    assert settings_reference.main(["--out", str(stale)]) == 0
    assert settings_reference.main(["--check", "--out", str(stale)]) == 0
