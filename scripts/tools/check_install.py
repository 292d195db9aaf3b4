#!/usr/bin/env python
"""Install checks: plume-jax installed as a library into a fresh virtual environment.

Each mode makes a new venv (under the system temporary folder unless
``--venv`` names one), installs the project there with pip, then runs a
smoke subset of the tests and ``python -m plume_jax list`` with that venv's
Python from a folder outside the checkout, so the installed copy is the one
imported (checked), not the source tree.

Modes::

    python scripts/tools/check_install.py pinned     # constraints.txt's exact versions (CI's set)
    python scripts/tools/check_install.py lowest     # every direct dependency at its lower bound
    python scripts/tools/check_install.py latest     # whatever pip picks now (the newest allowed)
    python scripts/tools/check_install.py keep-jax   # a venv that already has a newer jax:
                                               # `pip install -e .` must leave it alone
    python scripts/tools/check_install.py freeze > constraints.txt
                                               # today's versions of the dependency closure
                                               # of plume-jax[test,sb3,video], read from the
                                               # current environment (no venv, no install)

``pinned``, ``lowest`` and ``latest`` install a wheel built from a copy of the files git
tracks (what a clean clone has), non-editable, with the ``test`` extra (add
more with ``--extras``). ``lowest`` pins every requirement of
``pyproject.toml`` that has a ``>=`` bound (runtime dependencies and the
chosen extras) to exactly that bound and lets pip resolve the rest.
``keep-jax`` first installs ``jax==--jax-version`` (default: newer than the
lower bound and different from constraints.txt's pin), then
``pip install -e .`` from a copy of the checkout (an editable install writes
``plume_jax.egg-info`` beside the sources), and fails if pip touched jax or
jaxlib.

Every mode prints the wall time of each phase and exits non-zero on the first
failure. Downloads come from the package index pip is configured with.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest's own dependency tomli reads TOML too
    import tomli as tomllib

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = pathlib.Path(__file__).resolve().parents[2]
PYPROJECT = ROOT / "pyproject.toml"
CONSTRAINTS = ROOT / "constraints.txt"

# The smoke subset: the functional core (jax, chex, gymnax), the Gymnasium layer
# (gymnasium), PPO training end to end (flax, optax), the command line, packaging.
SMOKE_TESTS = (
    "tests/envs/test_core_env.py",
    "tests/gym/test_gym_lifecycle.py",
    "tests/train/test_train_run.py",
    "tests/cli/test_cli.py",
    "tests/repo/test_packaging.py",
)
# The extras whose closure `freeze` pins: the README's test command installs these.
FREEZE_EXTRAS = ("test", "sb3", "video", "docs", "typecheck")
# `keep-jax`'s default: newer than the lower bound, not constraints.txt's pin.
KEEP_JAX_VERSION = "0.10.1"


def project_table() -> dict:
    return tomllib.loads(PYPROJECT.read_text())["project"]


def requirements(extras: tuple[str, ...]) -> list[Requirement]:
    """The runtime dependencies plus those of ``extras``, as declared."""
    project = project_table()
    found = [Requirement(text) for text in project["dependencies"]]
    optional = project.get("optional-dependencies", {})
    for extra in extras:
        if extra not in optional:
            raise SystemExit(f"--extras: {extra!r} is not an extra of plume-jax "
                             f"(extras: {', '.join(sorted(optional))})")
        found += [Requirement(text) for text in optional[extra]]
    return found


def lowest_pins(extras: tuple[str, ...]) -> list[str]:
    """``name==bound`` for every requirement with a ``>=`` lower bound."""
    pins = {}
    for req in requirements(extras):
        lows = [spec.version for spec in req.specifier if spec.operator == ">="]
        if lows:
            pins[canonicalize_name(req.name)] = max(lows, key=Version)
    return [f"{name}=={version}" for name, version in sorted(pins.items())]


def override_pins(pins: list[str], overrides: list[str]) -> list[str]:
    """``pins`` with the ``name==version`` entries of ``overrides`` replacing
    (or adding to) theirs."""
    by_name = {canonicalize_name(Requirement(pin).name): pin for pin in pins}
    for pin in overrides:
        req = Requirement(pin)
        if [spec.operator for spec in req.specifier] != ["=="]:
            raise SystemExit(f"--pin: {pin!r} is not of the form name==version")
        by_name[canonicalize_name(req.name)] = pin
    return [by_name[name] for name in sorted(by_name)]


class NotInstalled(LookupError):
    """A package of the closure ``freeze`` walks is not installed here."""


def freeze_lines(extras: tuple[str, ...] = FREEZE_EXTRAS) -> list[str]:
    """``name==version`` for the dependency closure of plume-jax[extras] as the
    current environment has it (local version labels such as ``+cpu`` dropped,
    so a pin matches the wheel from any index)."""
    environment = default_environment()
    pins: dict[str, str] = {}
    walked_extras: dict[str, frozenset[str]] = {}
    pending = [(req, frozenset[str]()) for req in requirements(extras)]
    while pending:
        req, parent_extras = pending.pop()
        if req.marker is not None and not any(
                req.marker.evaluate({**environment, "extra": extra})
                for extra in parent_extras or {""}):
            continue
        name = canonicalize_name(req.name)
        requested = frozenset(req.extras)
        if name in pins and requested <= walked_extras[name]:
            continue
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError as error:
            raise NotInstalled(f"freeze: {req} is required but not installed here") from error
        pins[name] = Version(dist.version).public
        walked_extras[name] = walked_extras.get(name, frozenset()) | requested
        pending += [(Requirement(text), requested) for text in dist.requires or ()]
    return [f"{name}=={version}" for name, version in sorted(pins.items())]


class Venv:
    """A fresh virtual environment and the commands run in it."""

    def __init__(self, path: pathlib.Path, base_python: str = sys.executable):
        self.path = path
        self.base_python = base_python
        self.python = path / "bin" / "python"

    def create(self) -> None:
        if self.path.exists():
            shutil.rmtree(self.path)
        run([self.base_python, "-m", "venv", str(self.path)])

    def env(self) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items()
               if key not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
        env["PATH"] = f"{self.path / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["VIRTUAL_ENV"] = str(self.path)
        return env

    def pip(self, *args: str, cwd: pathlib.Path | None = None) -> None:
        run([str(self.python), "-m", "pip", *args], env=self.env(), cwd=cwd)

    def version(self, name: str) -> str:
        out = run([str(self.python), "-c",
                   f"import importlib.metadata as m; print(m.version({name!r}))"],
                  env=self.env(), capture=True)
        return out.strip()


def run(command: list[str], *, env: dict[str, str] | None = None,
        cwd: pathlib.Path | None = None, capture: bool = False) -> str:
    print("+", " ".join(command), flush=True)
    result = subprocess.run(command, env=env, cwd=cwd, text=True,
                            stdout=subprocess.PIPE if capture else None)
    if result.returncode != 0:
        raise SystemExit(f"command failed with exit status {result.returncode}: "
                         f"{' '.join(command)}")
    return result.stdout or ""


class Phases:
    """Wall time of each phase, printed at the end."""

    def __init__(self) -> None:
        self.times: list[tuple[str, float]] = []

    def __call__(self, name: str, action, *args):
        start = time.perf_counter()
        print(f"\n== {name}", flush=True)
        try:
            return action(*args)
        finally:
            self.times.append((name, time.perf_counter() - start))

    def report(self) -> None:
        print("\n== wall time")
        for name, seconds in self.times:
            print(f"{name:<32} {seconds:8.1f} s")
        print(f"{'total':<32} {sum(s for _, s in self.times):8.1f} s")


def tracked_copy(destination: pathlib.Path) -> pathlib.Path:
    """Copy the files git tracks, plus untracked files it does not ignore, i.e.
    what a clean clone of this work tree would have."""
    listing = run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others",
                   "--exclude-standard"], capture=True)
    for name in filter(None, listing.split("\0")):
        source = ROOT / name
        if source.is_file():
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return destination


def installed_copy_check(venv: Venv, outside: pathlib.Path,
                         editable_source: pathlib.Path | None) -> None:
    """plume_jax and agents import from the install (site-packages, or the
    source folder of an editable install), and ``python -m plume_jax`` runs."""
    code = ("import pathlib, plume_jax, agents; "
            "print(pathlib.Path(plume_jax.__file__).resolve().parent.parent); "
            "print(pathlib.Path(agents.__file__).resolve().parent.parent); "
            "print(plume_jax.__version__)")
    lines = run([str(venv.python), "-c", code], env=venv.env(), cwd=outside,
                capture=True).split()
    expected = str(editable_source.resolve()) if editable_source else "site-packages"
    for line in lines[:2]:
        if not line.endswith(expected):
            raise SystemExit(f"imported from {line}, expected {expected}")
    print("plume_jax and agents import from", lines[0], "version", lines[2])
    run([str(venv.python), "-m", "plume_jax", "list"], env=venv.env(), cwd=outside)


def smoke(venv: Venv, outside: pathlib.Path, tests: tuple[str, ...]) -> None:
    run([str(venv.python), "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "--rootdir", str(ROOT), "-c", str(PYPROJECT), *[str(ROOT / t) for t in tests]],
        env=venv.env(), cwd=outside)


def install_wheel(venv: Venv, work: pathlib.Path, extras: tuple[str, ...],
                  constraints: pathlib.Path | None) -> None:
    source = tracked_copy(work / "source")
    spec = f"{source}[{','.join(extras)}]" if extras else str(source)
    venv.pip("install", spec, *(["-c", str(constraints)] if constraints else []))


def versions_line(venv: Venv, names: tuple[str, ...]) -> None:
    print("installed:", ", ".join(f"{name} {venv.version(name)}" for name in names))


KEY_PACKAGES = ("jax", "jaxlib", "flax", "optax", "chex", "gymnax", "gymnasium", "numpy")


def check(mode: str, args: argparse.Namespace) -> None:
    work = pathlib.Path(tempfile.mkdtemp(prefix=f"plume_jax_{mode}_"))
    venv = Venv(pathlib.Path(args.venv) if args.venv else work / "venv", args.python)
    outside = work / "cwd"
    outside.mkdir()
    phases = Phases()
    try:
        run_phases(mode, args, work, venv, outside, phases)
    finally:
        phases.report()
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print("kept", work)


def run_phases(mode: str, args: argparse.Namespace, work: pathlib.Path, venv: Venv,
               outside: pathlib.Path, phases: Phases) -> None:
    phases("create venv", venv.create)
    extras = tuple(args.extras)
    if mode == "pinned":
        phases("install (constraints.txt)", install_wheel, venv, work, extras, CONSTRAINTS)
    elif mode == "latest":
        phases("install (newest allowed)", install_wheel, venv, work, extras, None)
    elif mode == "lowest":
        pins = override_pins(lowest_pins(extras), args.pin)
        constraints = work / "lowest.txt"
        constraints.write_text("\n".join(pins) + "\n")
        print("lower bounds pinned:", " ".join(pins))
        phases("install (lower bounds)", install_wheel, venv, work, extras, constraints)
    else:  # keep-jax
        phases(f"install jax=={args.jax_version}", venv.pip, "install",
               f"jax=={args.jax_version}")
        before = {name: venv.version(name) for name in ("jax", "jaxlib")}
        # an editable install writes plume_jax.egg-info beside the sources: use a copy
        source = tracked_copy(work / "source")
        spec = f"{source}[{','.join(extras)}]" if extras else str(source)
        phases("pip install -e .", venv.pip, "install", "-e", spec)
        after = {name: venv.version(name) for name in ("jax", "jaxlib")}
        if after != before:
            raise SystemExit(f"pip install -e . changed {before} to {after}")
        print(f"kept {before} after pip install -e .")
    versions_line(venv, KEY_PACKAGES)
    phases("imports and python -m plume_jax", installed_copy_check, venv, outside,
           work / "source" if mode == "keep-jax" else None)
    if not args.no_tests:
        phases("smoke tests", smoke, venv, outside, tuple(args.tests))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=("pinned", "lowest", "latest", "keep-jax", "freeze"))
    parser.add_argument("--extras", nargs="*", default=["test"],
                        help="extras to install (default: test)")
    parser.add_argument("--tests", nargs="*", default=list(SMOKE_TESTS),
                        help="test files or node ids, relative to the checkout")
    parser.add_argument("--no-tests", action="store_true", help="install and import only")
    parser.add_argument("--jax-version", default=KEEP_JAX_VERSION,
                        help="keep-jax: the jax installed first (default %(default)s)")
    parser.add_argument("--pin", nargs="*", default=[], metavar="NAME==VERSION",
                        help="lowest: install this version instead of the lower bound "
                        "(e.g. torch==2.13.0 where only that wheel is at hand)")
    parser.add_argument("--python", default=sys.executable,
                        help="the interpreter the venv is made from (default: this one)")
    parser.add_argument("--venv", help="where to make the venv (default: a new temp folder)")
    parser.add_argument("--keep", action="store_true", help="keep the venv and copies")
    args = parser.parse_args(argv)
    if args.mode == "freeze":
        header = ("# Exact versions for reproducible CI: the dependency closure of\n"
                  f"# plume-jax[{','.join(FREEZE_EXTRAS)}] as tested. pyproject.toml states the\n"
                  "# compatible ranges; this file pins one point inside them.\n"
                  "# Regenerate: python scripts/tools/check_install.py freeze > constraints.txt\n")
        try:
            print(header + "\n".join(freeze_lines()))
        except NotInstalled as error:
            raise SystemExit(str(error)) from error
        return 0
    check(args.mode, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
