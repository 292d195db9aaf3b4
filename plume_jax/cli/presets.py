"""``plume-jax list``: the registered presets."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    sub.add_parser("list", help="list the presets")


def run(args: argparse.Namespace) -> int:
    from plume_jax.registry import list_presets

    for pid, description in list_presets().items():
        print(f"{pid}\n    {description}")
    return 0
