"""``plume-jax configs``: write the configs shipped with plume_jax (the
repository's ``configs/``: example training, sweep and tuning configs, the
presets' files, the evaluation scenarios, the zoo) out as a folder, so that
the docs' commands (``plume-jax train --config configs/train_gaussian.yaml``)
run verbatim outside a source checkout (:mod:`plume_jax.files.shipped`)."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "configs", help="write the shipped configs/ folder (example configs, scenarios, zoo) "
        "here, for the docs' commands",
        description="Copy the configs shipped with plume_jax (the source checkout's configs/, "
        "or the copy an installed wheel carries) to --out, whole or not at all: the example "
        "training, sweep and tuning configs, the presets' files, the evaluation scenarios "
        "and the zoo. Run it once in a working folder and the docs' commands that name "
        "configs/... run there as written. zoo:NAME agents and scenario names need no copy.")
    p.add_argument("--out", default="configs",
                   help="the folder to write (must not exist yet; default configs)")


def run(args: argparse.Namespace) -> int:
    from plume_jax.files.shipped import configs_root, copy_configs

    source = configs_root()
    written = copy_configs(args.out)
    count = sum(1 for path in written.rglob("*") if path.is_file())
    print(f"wrote {written} ({count} files, copied from {source})")
    return 0
