"""Write docs/config_reference.md from the settings declarations.

Every setting a user can write is declared once, as a
:class:`plume_jax.settings.Setting` (default, checker, static or dynamic,
one line of doc):

- training configs: :func:`plume_jax.train.config.schemas` (the ``algo``
  section: the settings every algorithm shares, then each registered
  algorithm's own ``SETTINGS``);
- scenario files: :data:`plume_jax.evaluate.scenario.SCENARIO_SCHEMA`;
- components: each type's ``SETTINGS`` in the tables of
  :data:`plume_jax.envs.presets.COMPONENTS`.

The reference is generated from them, never written by hand::

    python scripts/docs/settings_reference.py            # (re)write the file
    python scripts/docs/settings_reference.py --check    # exit 1 if it is stale

``tests/docs/test_docs_config_reference.py`` fails when the committed file differs
from what this writes, so a new or changed setting needs the file
regenerated.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from collections.abc import Mapping
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUTPUT = ROOT / "docs" / "config_reference.md"


def _value(value: Any) -> str:
    """A default as YAML-like text in a code span (``required`` when there is none)."""
    from plume_jax.settings import REQUIRED

    if value is REQUIRED:
        return "*required*"

    def plain(v: Any) -> Any:
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        if isinstance(v, Mapping):
            return {str(k): plain(x) for k, x in v.items()}
        if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
            return repr(v)
        return v

    try:
        text = json.dumps(plain(value))
    except TypeError:
        text = repr(value)
    return f"`{_cell(text)}`"


def _cell(text: str) -> str:
    """Text that is safe inside a markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _table(rows: list[list[str]], header: list[str]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return out + [""]


def _kind(setting: Any) -> str:
    return "static" if setting.static else "dynamic"


def training_section() -> list[str]:
    from plume_jax.train.config import SECTIONS, schemas

    lines = [
        "## Training configs",
        "",
        "`plume-jax train --config FILE` and `plume-jax sweep` read a YAML file with the "
        "sections below (module `plume_jax.train.config`; [training.md](training.md) explains "
        "them). Every key is optional except `algo.total_steps` and one of `env.id` / "
        "`env.config`. *Static* settings are compiled into the program (sweep members that "
        "differ in one run as separate programs); *dynamic* ones are not (in `algo`: leaves "
        "of the algorithm's hyperparameters, swept within one program). Any key can also be set "
        "by its dotted name (`--set algo.learning_rate=3e-4`).",
        "",
    ]
    for section, schema in schemas().items():
        assert section in SECTIONS
        lines += [f"### `{section}`", ""]
        if section == "algo":
            lines += algo_section()
            continue
        rows = [[f"`{key}`", _value(s.default), _kind(s), _cell(s.doc)]
                for key, s in schema.items()]
        lines += _table(rows, ["key", "default", "kind", "meaning"])
    return lines


def algo_section() -> list[str]:
    """The ``algo`` section: the shared settings, then each registered
    algorithm's own (a config holds the shared ones and its algorithm's)."""
    from plume_jax.train.algorithms.base import ALGORITHMS, algorithm_class
    from plume_jax.train.config import COMMON_ALGO

    def rows(settings: Any) -> list[str]:
        return _table([[f"`{key}`", _value(s.default), _kind(s), _cell(s.doc)]
                       for key, s in settings.items()], ["key", "default", "kind", "meaning"])

    lines = ["The settings every algorithm shares, then those of the algorithm that "
             "`algorithm` names, and no others: another algorithm's setting is refused "
             "(\"did you mean\"). An algorithm outside plume_jax declares its own "
             "([training.md](training.md#adding-an-algorithm)).", "",
             "#### Shared by every algorithm", ""] + rows(COMMON_ALGO)
    for name in ALGORITHMS:
        lines += [f"#### `algorithm: {name}`", ""] + rows(algorithm_class(name).SETTINGS)
    return lines


def scenario_section() -> list[str]:
    from plume_jax.evaluate.scenario import SCENARIO_SCHEMA

    lines = [
        "## Scenario files",
        "",
        "`plume-jax evaluate --scenario FILE` reads a YAML file with these keys (module "
        "`plume_jax.evaluate.scenario`; examples in `configs/scenarios/`). `env` and "
        "`agent` are required; `expect` checks only the keys given.",
        "",
    ]
    for section, schema in SCENARIO_SCHEMA.items():
        lines += [f"### {'top level' if not section else f'`{section}`'}", ""]
        rows = [[f"`{key}`", _value(s.default), _cell(s.doc)] for key, s in schema.items()]
        lines += _table(rows, ["key", "default", "meaning"])
    return lines


def component_section() -> list[str]:
    from plume_jax.envs.presets import COMPONENTS, ENV_SETTINGS

    lines = [
        "## Components",
        "",
        "An env config (and a preset's overrides, `env.overrides` of a training config) "
        f"names one component per slot, `{{type: <name>, ...settings}}`, beside the env's "
        f"own settings ({', '.join(f'`{k}`' for k in ENV_SETTINGS)}). "
        "[components.md](components.md) describes the components; these are their settings, "
        "from each type's `SETTINGS`. *Static* settings fix a shape or a code path; "
        "*dynamic* ones are leaves of the env params (sweepable under `vmap`).",
        "",
    ]
    for slot, table in COMPONENTS.items():
        lines += [f"### `{slot}`", "",
                  "types: " + ", ".join(f"`{name}`" for name in table), ""]
        for name, cls in table.items():
            lines += [f"#### `{slot}: {name}` ({cls.__name__})", ""]
            settings = cls.SETTINGS
            if not settings:
                lines += ["No settings.", ""]
                continue
            rows = [[f"`{key}`", _value(s.default), _kind(s), _cell(s.doc)]
                    for key, s in settings.items()]
            lines += _table(rows, ["setting", "default", "kind", "meaning"])
    return lines


def render() -> str:
    """The whole reference, as written to docs/config_reference.md."""
    lines = [
        "# Configuration reference",
        "",
        "<!-- Generated by scripts/docs/settings_reference.py from the settings declarations: "
        "do not edit by hand. Regenerate with `python scripts/docs/settings_reference.py`; "
        "tests/docs/test_docs_config_reference.py fails when this file is stale. -->",
        "",
        "Every key of a training config, a scenario file and a component, with its default, "
        "whether it is static or dynamic, and what it means. Bad values and unknown keys "
        "raise `ValidationError` naming the key, the value and what is allowed (an unknown "
        "key with the closest known ones: `did you mean ...?`).",
        "",
        "- [Training configs](#training-configs)",
        "- [Scenario files](#scenario-files)",
        "- [Components](#components)",
        "",
    ]
    lines += training_section() + scenario_section() + component_section()
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if the file differs from what would be written")
    parser.add_argument("--out", type=pathlib.Path, default=OUTPUT, help="the file to write")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else None
        if current != text:
            print(f"{args.out} is stale: run python scripts/docs/settings_reference.py",
                  file=sys.stderr)
            return 1
        return 0
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
