"""``plume-jax list``: the registered presets."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    sub.add_parser("list", help="list the presets")


def run(args: argparse.Namespace) -> int:
    from plume_jax.registry import list_presets

    for pid, description in list_presets().items():
        print(f"{pid}\n    {description}")
    print(GYMNASIUM_IDS)
    return 0


#: The last lines of ``plume-jax list``: how Gymnasium reaches a preset by id.
GYMNASIUM_IDS = (
    "\nGymnasium ids (single-agent presets): plume_jax/<preset> once plume_jax is imported;\n"
    "plume_jax:plume_jax/<preset> (module, colon, id) from a tool that never imports it,\n"
    "e.g. CleanRL's --env-id plume_jax:plume_jax/PlumeNav-Gaussian-v0.")
