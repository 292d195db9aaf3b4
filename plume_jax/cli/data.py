"""``plume-jax data``: the dataset registry (:mod:`plume_jax.datasets`).

``list`` (sizes, licences, cache state), ``describe ID`` (every fact and the
layout), ``download ID`` (resumable, verified, progress on stderr),
``verify [ID]`` (re-hash cached files). ``--catalog FILE`` adds entries
(default ``$PLUME_JAX_DATA_CATALOG``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from plume_jax.core.errors import ValidationError


def add_parser(sub: argparse._SubParsersAction) -> None:
    data = sub.add_parser("data", help="registered plume datasets: list, describe, download, "
                          "verify", description="The dataset registry and its cache "
                          "($PLUME_JAX_DATA_DIR, default ~/.cache/plume_jax; mirror: "
                          "$PLUME_JAX_DATA_MIRROR).")
    data.add_argument("--catalog", default=None, metavar="FILE",
                      help="YAML catalog of extra datasets (default $PLUME_JAX_DATA_CATALOG)")
    actions = data.add_subparsers(dest="data_command", required=True)
    actions.add_parser("list", help="the datasets, their sizes, licences and cache state")
    describe = actions.add_parser("describe", help="every fact of one dataset")
    describe.add_argument("id")
    describe.add_argument("--json", action="store_true", help="as JSON")
    dl = actions.add_parser("download", help="download and verify one dataset")
    dl.add_argument("id")
    dl.add_argument("--checksum", default=None, metavar="ALGO:HEX",
                    help="the checksum to verify against (sha256:... or md5:...), for an "
                    "entry without one or to override it")
    dl.add_argument("--allow-unverified", action="store_true",
                    help="accept an entry with no known checksum without --checksum")
    dl.add_argument("--max-bytes", type=int, default=None,
                    help="refuse a dataset larger than this (default 64 GiB)")
    dl.add_argument("--quiet", action="store_true", help="no progress")
    verify = actions.add_parser("verify", help="re-check cached files against their checksums")
    verify.add_argument("id", nargs="?", default=None, help="one dataset (default: all cached)")


def _size(n: int, exact: bool) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{'' if exact else '~'}{n / scale:.1f} {unit}"
    return f"{n} B"


def run(args: argparse.Namespace) -> int:
    from plume_jax import datasets as ds

    entries = ds.registry(args.catalog)
    if args.data_command == "list":
        print(f"cache: {ds.cache_dir()}")
        print(f"{'id':28} {'size':>10}  {'licence':12} {'checksum':9} {'state':14} title")
        for e in entries.values():
            state = ds.status(e)
            checksum = ds.effective_checksum(e)[0] if state.startswith("cached") else e.checksum
            algorithm = checksum.split(":", 1)[0] if checksum else "UNKNOWN"
            print(f"{e.id:28} {_size(e.size_bytes, e.size_exact):>10}  {e.licence:12} "
                  f"{algorithm:9} {state:14} {e.title}")
        return 0
    if args.data_command == "describe":
        e = ds.get(args.id, args.catalog)
        facts = {**e.to_dict(), "path": str(ds.dataset_path(e)), "state": ds.status(e),
                 "checksum_from_download": ds.remembered_checksum(e),
                 "download_url": ds.cache.source_url(e)}
        if args.json:
            print(json.dumps(facts, indent=2))
        else:
            for key, value in facts.items():
                if key == "layout":
                    for k, v in value.items():
                        print(f"  layout.{k}: {v}")
                else:
                    print(f"{key}: {value if value is not None else 'unknown'}")
        return 0
    if args.data_command == "download":
        e = ds.get(args.id, args.catalog)
        from plume_jax.progress import ProgressBar

        bars: list[ProgressBar] = []

        def progress(done: int, total: int | None) -> None:
            if not bars:  # one total for the whole line: the size served, else the registry's
                bars.append(ProgressBar(total or e.size_bytes, f"download {e.id}",
                                        unit="bytes", quiet=args.quiet, stream=sys.stderr))
                bars[0].restart_clock(done)  # a resume: rate and ETA from here
            bars[0].update(done)

        try:
            path = ds.download(e, checksum=args.checksum,
                               allow_unverified=args.allow_unverified,
                               max_bytes=args.max_bytes, progress=progress)
            if bars:
                bars[0].update(bars[0].total)  # verified: the whole file is there
        finally:
            for bar in bars:
                bar.close()
        checksum, _ = ds.effective_checksum(e)
        print(f"{e.id}: verified ({checksum or 'unverified'}) at {path}")
        return 0
    # verify
    chosen = [ds.get(args.id, args.catalog)] if args.id else \
        [e for e in entries.values() if os.path.lexists(ds.dataset_path(e))]  # a folder too
    bad = 0
    for e in chosen:
        try:
            path = ds.require_cached(e)
            checksum, whose = ds.effective_checksum(e)
            ds.verify_file(path, e, checksum, whose)
            print(f"{e.id}: ok ({checksum or 'no checksum known: sha256 printed only'}"
                  f"{'' if whose == ds.cache.REGISTRY else f', {whose}'})")
        except ValidationError as error:
            bad += 1
            print(f"{e.id}: FAILED: {error}", file=sys.stderr)
    if not chosen:
        print("no dataset is cached")
    return 1 if bad else 0
