#!/usr/bin/env python
"""The learned searcher's evaluation as a user runs it, before and after, in one run.

Times the whole command ``plume-jax evaluate --scenario
configs/scenarios/poisson_iso19x19_learned.yaml --episodes N --seed 4242``
(``--capture DIR`` for the sizes marked ``:capture``) from two source trees,
interleaved (before, after, after, before, ...), each in its own process
with its tree first on ``PYTHONPATH`` and the tree as working folder (so
each tree reads its own scenario and policy). Per run: wall seconds, CPU
seconds (user + system) and peak resident memory of that process (the
kernel's accounting of the reaped child, ``os.wait4``). Per size: whether
the two trees' episodes agree (the captured ``length`` column, else the
report's success rate and mean steps), which a speed fix must not change.

Issue 59: the 11-27 tree (c8c6c5e) ran 2,048 captured searches in 545 s,
the main of 12-07 in 1,048 s (its capture batches reran 1,972 searches).
A regression of that size shows in this table.

Usage::

    git archive c8c6c5e | tar -x -C /tmp/before     # the 11-27 tree
    git archive HEAD | tar -x -C /tmp/after
    python scripts/bench/evaluate_searcher.py --before /tmp/before --after /tmp/after \\
        --sizes 256 2048:capture --out benchmarks/evaluate_searcher.json
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

SCENARIO = "configs/scenarios/poisson_iso19x19_learned.yaml"
SEED = 4242


def parse_size(text: str) -> tuple[int, bool]:
    """``"2048:capture"`` -> ``(2048, True)``; ``"256"`` -> ``(256, False)``."""
    count, _, flag = text.partition(":")
    if flag not in ("", "capture") or not count.isdigit() or int(count) < 1:
        raise argparse.ArgumentTypeError(
            f"{text!r}: a number of searches, optionally followed by :capture (e.g. 2048:capture)")
    return int(count), flag == "capture"


def run_once(tree: pathlib.Path, episodes: int, capture: bool, scratch: pathlib.Path
             ) -> dict[str, Any]:
    """One timed ``plume-jax evaluate`` from ``tree``: its figures and what
    its episodes came out as."""
    out = pathlib.Path(tempfile.mkdtemp(dir=scratch))
    command = [sys.executable, "-m", "plume_jax", "evaluate", "--scenario", SCENARIO,
               "--episodes", str(episodes), "--seed", str(SEED), "--out", str(out / "eval")]
    if capture:
        command += ["--capture", str(out / "capture")]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    start = time.perf_counter()
    with open(out / "log.txt", "wb") as log:
        child = subprocess.Popen(command, cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        tail = (out / "log.txt").read_text(errors="replace")[-2000:]
        raise SystemExit(f"{' '.join(command)} (in {tree}) exited {child.returncode}; the end "
                         f"of its output:\n{tail}")
    (report,) = sorted((out / "eval").glob("*.json"))
    metrics = json.loads(report.read_text())["metrics"]
    row: dict[str, Any] = {
        "wall_s": round(wall, 1), "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
        "peak_rss_gb": round(usage.ru_maxrss / 2**20, 2),  # ru_maxrss: KiB on Linux
        "success_rate": metrics["success_rate"], "mean_steps": metrics["mean_steps"]}
    if capture:
        import pyarrow.parquet as pq

        row["lengths"] = pq.read_table(out / "capture" / "episodes.parquet",
                                       columns=["length"]).column("length").to_pylist()
    shutil.rmtree(out)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, type=pathlib.Path, help="the older source tree")
    parser.add_argument("--after", required=True, type=pathlib.Path, help="the newer source tree")
    parser.add_argument("--sizes", nargs="+", type=parse_size, default=[(256, False), (2048, True)],
                        help="searches per run, N or N:capture (default 256 2048:capture)")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each tree per size")
    parser.add_argument("--out", type=pathlib.Path, default=None, help="JSON file of the rows")
    args = parser.parse_args(argv)
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    for label, tree in trees.items():
        if not (tree / "plume_jax" / "__main__.py").is_file() or not (tree / SCENARIO).is_file():
            parser.error(f"--{label} {tree}: a plume_jax source tree with {SCENARIO}")
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for episodes, capture in args.sizes:
            runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
            for repeat in range(args.repeats):
                order = ["before", "after"] if repeat % 2 == 0 else ["after", "before"]
                for label in order:
                    runs[label].append(run_once(trees[label], episodes, capture,
                                                pathlib.Path(scratch)))
                    print(f"{episodes} searches{' (capture)' * capture}, {label}: "
                          f"{runs[label][-1]['wall_s']} s", flush=True)
            same = all(a.get("lengths", [a["success_rate"], a["mean_steps"]])
                       == b.get("lengths", [b["success_rate"], b["mean_steps"]])
                       for a in runs["before"] for b in runs["after"])
            for label, found in runs.items():
                for r in found:
                    r.pop("lengths", None)
                rows.append({"searches": episodes, "capture": capture, "code": label,
                             "runs": found, "same_episodes": same})
    print("| searches | capture | code | wall s | CPU s | peak RSS GB | success | mean steps "
          "| same episodes |")
    print("|---:|---|---|---:|---:|---:|---:|---:|---|")
    for row in rows:
        for r in row["runs"]:
            print(f"| {row['searches']} | {'yes' if row['capture'] else 'no'} | {row['code']} "
                  f"| {r['wall_s']} | {r['cpu_s']} | {r['peak_rss_gb']} | "
                  f"{r['success_rate']:.4f} | {r['mean_steps']:.2f} | "
                  f"{'yes' if row['same_episodes'] else 'NO'} |")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({
            "command": SCENARIO, "seed": SEED, "before": str(trees["before"]),
            "after": str(trees["after"]), "machine": platform.platform(),
            "cores": os.cpu_count(), "load_at_end": os.getloadavg(), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
