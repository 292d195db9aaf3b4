"""plume-jax installs like a library: compatible ranges in pyproject.toml,
exact versions only in constraints.txt, one version string, ``python -m
plume_jax`` is the ``plume-jax`` command, the wheel carries ``py.typed`` and
the top-level ``agents`` package, and another ``agents`` module cannot stand
in for plume_jax's silently.

The tests import whichever plume_jax the test run imports (the checkout, or
an installed copy when ``scripts/tools/check_install.py`` runs them from outside
the checkout) and run subprocesses against that same copy.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import io
import json
import os
import pathlib
import subprocess
import sys
import zipfile

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

import plume_jax
from plume_jax.core.agents_package import check_agents_package, expected_agents_init

ROOT = pathlib.Path(__file__).resolve().parents[2]
# The folder holding the plume_jax (and agents) that this test run imports.
IMPORT_ROOT = pathlib.Path(plume_jax.__file__).resolve().parent.parent


def _check_install():
    """scripts/tools/check_install.py as a module (loaded from its path, so this works
    from any working directory)."""
    spec = importlib.util.spec_from_file_location("check_install",
                                                  ROOT / "scripts" / "tools" / "check_install.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CHECK_INSTALL = _check_install()
tomllib = CHECK_INSTALL.tomllib  # tomllib, or tomli on Python 3.10
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]


def _declared(extras=None) -> list[Requirement]:
    extras = PROJECT["optional-dependencies"] if extras is None else extras
    return CHECK_INSTALL.requirements(tuple(extras))


def _constraints() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            req = Requirement(line)
            assert [spec.operator for spec in req.specifier] == ["=="], line
            pins[canonicalize_name(req.name)] = next(iter(req.specifier)).version
    return pins


def _run_python(*args: str, cwd: pathlib.Path, extra_env: dict | None = None):
    """Run this test run's Python with this run's plume_jax importable (and
    nothing from ``cwd`` unless Python itself puts it first)."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONSAFEPATH"}
    env.update({"PYTHONPATH": str(IMPORT_ROOT), **(extra_env or {})})
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=300)


# --- requirements: ranges in pyproject, exact versions in constraints.txt ----------

def test_requirements_are_ranges_not_exact_pins():
    """Regression (issue 17): pyproject pinned jax==0.10.2, torch==2.13.0, ...,
    so installing plume-jax downgraded the user's JAX and torch."""
    for req in _declared():
        operators = {spec.operator for spec in req.specifier}
        assert operators & {">=", ">", "~="}, f"{req} has no lower bound"
        assert not operators & {"==", "==="}, f"{req} is an exact pin"


def test_jaxlib_is_left_to_jax():
    """jax pins its own jaxlib; a separate jaxlib requirement would fight the
    CUDA/TPU builds that `jax[cuda12]` or `jax[tpu]` bring."""
    names = {canonicalize_name(req.name) for req in _declared()}
    assert "jaxlib" not in names and "jax" in names


def test_gpu_extra_asks_jax_for_cuda_in_the_same_range():
    (jax_runtime,) = [r for r in _declared(()) if r.name == "jax"]
    (jax_gpu,) = [Requirement(t) for t in PROJECT["optional-dependencies"]["gpu"]]
    assert jax_gpu.name == "jax" and jax_gpu.extras == {"cuda12"}
    assert jax_gpu.specifier == jax_runtime.specifier


def test_constraints_pin_every_declared_requirement_inside_its_range():
    pins = _constraints()
    for req in _declared([e for e in PROJECT["optional-dependencies"] if e != "gpu"]):
        name = canonicalize_name(req.name)
        assert name in pins, f"constraints.txt does not pin {req.name}"
        assert req.specifier.contains(pins[name], prereleases=True), \
            f"constraints.txt pins {name}=={pins[name]}, outside {req}"


def test_constraints_pin_torch_exactly_so_ci_takes_the_cpu_wheel():
    """An unpinned torch resolves to the newest CUDA build (several GB)."""
    assert "torch" in _constraints()


def test_constraints_cover_the_installed_closure_of_the_ci_extras():
    """Every package that `pip install -e ".[test,sb3,video,docs,typecheck]"` brings in is
    pinned, so CI installs the same set each time (names only: the versions
    here are whatever this environment has)."""
    try:
        closure = CHECK_INSTALL.freeze_lines()
    except CHECK_INSTALL.NotInstalled as error:
        pytest.skip(f"the CI extras are not all installed here ({error})")
    missing = {line.split("==")[0] for line in closure} - set(_constraints())
    assert not missing, f"not in constraints.txt: {sorted(missing)} (regenerate it: " \
        "python scripts/tools/check_install.py freeze > constraints.txt)"


def test_lowest_pins_take_each_lower_bound():
    pins = CHECK_INSTALL.lowest_pins(("test",))
    by_name = {canonicalize_name(Requirement(p).name): p for p in pins}
    for req in _declared(("test",)):
        lows = [spec.version for spec in req.specifier if spec.operator == ">="]
        assert by_name[canonicalize_name(req.name)] == \
            f"{canonicalize_name(req.name)}=={max(lows, key=Version)}"
    overridden = CHECK_INSTALL.override_pins(pins, ["NumPy==2.0.0", "torch==2.13.0"])
    assert len(overridden) == len(pins) + 1
    assert "NumPy==2.0.0" in overridden and by_name["numpy"] not in overridden
    assert "torch==2.13.0" in overridden
    with pytest.raises(SystemExit, match="--pin"):
        CHECK_INSTALL.override_pins(pins, ["torch>=2"])


def test_tensorboard_command_the_readme_prints_comes_with_a_documented_extra():
    """Issue 30 item 3: the README printed `tensorboard --logdir runs/`, but
    `pip install -e .` does not install the viewer (it came only with the
    test extra, through tbparse). The `tensorboard` extra brings it, and each
    page that prints the command names the extra beside it."""
    import re

    (req,) = [Requirement(t) for t in PROJECT["optional-dependencies"]["tensorboard"]]
    assert canonicalize_name(req.name) == "tensorboard"
    assert "tensorboard" not in {canonicalize_name(Requirement(t).name)
                                 for t in PROJECT["dependencies"]}
    for page in (ROOT / "README.md", ROOT / "docs" / "training.md"):
        text = page.read_text()
        paragraph = next(p for p in re.split(r"\n\s*\n", text) if "tensorboard --logdir runs/`" in p)
        assert 'pip install -e ".[tensorboard]"' in " ".join(paragraph.split()), page.name
    assert "| `tensorboard` |" in (ROOT / "docs" / "installation.md").read_text()


def test_ci_installs_with_the_constraints_file():
    lines = [ln for ln in (ROOT / ".ci" / "run").read_text().splitlines()
             if ln.strip() and not ln.lstrip().startswith("#")]
    (install,) = [ln for ln in lines if "pip install -e" in ln]
    assert "-c constraints.txt" in install


# --- one version --------------------------------------------------------------------

def test_version_is_single_sourced_from_the_package():
    assert "version" in PROJECT["dynamic"] and "version" not in PROJECT
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == \
        {"attr": "plume_jax.core.version.__version__"}
    from setuptools.config.pyprojecttoml import read_configuration

    # what setuptools will write into the wheel's metadata
    built = read_configuration(ROOT / "pyproject.toml", expand=True)["project"]["version"]
    assert built == plume_jax.__version__
    assert str(Version(plume_jax.__version__)) == plume_jax.__version__


def test_installed_metadata_reports_the_package_version():
    try:
        dist = importlib.metadata.distribution("plume-jax")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("plume-jax is not installed in this environment")
    direct = dist.read_text("direct_url.json")
    if direct is not None:  # an editable or path install: is it this copy?
        url = json.loads(direct)["url"]
        if url.removeprefix("file://") not in (str(IMPORT_ROOT), str(ROOT)) \
                and dist.locate_file("plume_jax") != IMPORT_ROOT / "plume_jax":
            pytest.skip(f"the installed plume-jax comes from {url}, not this checkout")
    assert dist.version == plume_jax.__version__


def _release_headings() -> list[str]:
    """The versions of CHANGELOG.md's release headings (``## [0.2.0] - date``),
    newest first, as written; ``Unreleased`` is not a release."""
    import re

    headings = re.findall(r"^## \[([^\]]+)\]", (ROOT / "CHANGELOG.md").read_text(), flags=re.M)
    return [h for h in headings if h != "Unreleased"]


def test_changelog_starts_at_this_version():
    """Regression (issue 55, item 6): modules moved and the version stayed
    0.1.0, the break noted only in the changelog's Unreleased section. The
    newest release in CHANGELOG.md is the package's version, and releases are
    listed newest first."""
    releases = _release_headings()
    assert releases and releases[0] == plume_jax.__version__, \
        f"CHANGELOG.md's newest release is {releases[:1]}, the package is {plume_jax.__version__}"
    versions = [Version(v) for v in releases]
    assert versions == sorted(versions, reverse=True) and len(set(versions)) == len(versions)


def _changelog_section(version: str) -> str:
    text = (ROOT / "CHANGELOG.md").read_text()
    start = text.index(f"## [{version}]")
    end = text.find("\n## [", start + 1)
    return text[start:end if end >= 0 else len(text)]


@pytest.mark.parametrize("version", ["0.2.0", "0.3.0", "0.4.0"])
def test_changelog_lists_breaking_changes_first(version):
    """A release that moved modules says so before anything else."""
    section = _changelog_section(version)
    subsections = [line for line in section.splitlines() if line.startswith("### ")]
    assert subsections[0] == "### Breaking changes"


@pytest.mark.parametrize("version, at_least, example", [
    ("0.2.0", 20, ("plume_jax.legacy_step", "plume_jax.envs.legacy_step")),
    ("0.3.0", 9, ("plume_jax.train.run_folder", "plume_jax.train.folder")),
    ("0.4.0", 2, ("plume_jax.train.trainer", "plume_jax.train.run"))])
def test_changelog_moved_modules_are_gone_and_their_new_paths_import(version, at_least, example):
    """Each ``old -> new`` module path in a release's breaking changes: the
    new one imports, the old one is gone (so the list is neither stale nor
    invented)."""
    import importlib
    import re

    section = _changelog_section(version).split("### ", 2)[1]
    moves = re.findall(r"^- `(plume_jax[\w.]*)` -> `(plume_jax[\w.]*)`$", section, flags=re.M)
    assert len(moves) >= at_least and example in moves
    for old, new in moves:
        importlib.import_module(new)
        assert importlib.util.find_spec(old) is None, f"{old} still imports"


# --- python -m plume_jax ------------------------------------------------------------

def test_console_script_and_python_dash_m_call_the_same_function():
    import plume_jax.__main__ as dunder_main
    from plume_jax import cli

    assert PROJECT["scripts"]["plume-jax"] == "plume_jax.cli:main"
    assert dunder_main.main is cli.main


def test_python_dash_m_plume_jax_is_the_plume_jax_command(tmp_path):
    from plume_jax import cli

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert cli.main(["list"]) == 0
    result = _run_python("-m", "plume_jax", "list", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == buffer.getvalue()


def test_python_dash_m_plume_jax_reports_bad_input_like_the_command(tmp_path, capsys):
    """The status main returns is python -m's exit status (a fresh interpreter);
    argparse's usage errors name the command, not ``__main__.py`` (in this
    process: sys.argv[0] is pytest's, so only an explicit prog names it)."""
    result = _run_python("-m", "plume_jax", "demo", "--preset", "NoSuchPreset-v0",
                         cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("plume-jax: error:") and "NoSuchPreset-v0" in result.stderr
    from plume_jax import cli

    with pytest.raises(SystemExit) as usage:
        cli.main(["no-such-command"])
    assert usage.value.code == 2 and capsys.readouterr().err.startswith("usage: plume-jax")


# --- the wheel ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    """A wheel built, without network, from a copy of what a clean clone has."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    import setuptools

    if Version(setuptools.__version__) < Version("70.1"):  # builds wheels by itself from 70.1
        pytest.skip(f"setuptools {setuptools.__version__} here; the offline build needs >= 70.1")
    work = tmp_path_factory.mktemp("wheel")
    source = CHECK_INSTALL.tracked_copy(work / "source")
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--no-index", "-w", str(work / "dist"), str(source)],
        text=True, capture_output=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    (path,) = (work / "dist").glob("plume_jax-*.whl")
    return zipfile.ZipFile(path)


def test_wheel_carries_the_typing_marker_data_and_both_packages(wheel):
    names = set(wheel.namelist())
    for required in ("plume_jax/py.typed", "agents/py.typed", "plume_jax/__main__.py",
                     "plume_jax/__init__.py",
                     "agents/__init__.py", "plume_jax/core/agents_package.py"):
        assert required in names, required
    assert any(n.startswith("plume_jax/data/") and n.endswith(".npz") for n in names)
    # issue 55: the zoo and the scenarios come with the wheel (setup.py copies configs/)
    assert "plume_jax/data/configs/scenarios/singh2023_constant.yaml" in names
    assert "plume_jax/data/configs/zoo/gaussian-gru/1/entry.yaml" in names
    assert "plume_jax/data/configs/train_gaussian.yaml" in names
    top_level = {n.split("/")[0] for n in names if "/" in n and ".dist-info" not in n}
    assert top_level == {"plume_jax", "agents"}, "the wheel installs other import names"


def test_wheel_metadata_has_the_version_ranges_and_entry_point(wheel):
    (metadata_name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    metadata = wheel.read(metadata_name).decode()
    assert f"\nVersion: {plume_jax.__version__}\n" in metadata
    requires = [Requirement(line.split(": ", 1)[1]) for line in metadata.splitlines()
                if line.startswith("Requires-Dist: ")]
    assert requires and all("==" not in str(req.specifier) for req in requires)
    (entry_points_name,) = [n for n in wheel.namelist() if n.endswith("entry_points.txt")]
    assert "plume-jax = plume_jax.cli:main" in wheel.read(entry_points_name).decode()


# --- the top-level agents package ----------------------------------------------------

def test_agents_imported_here_is_the_one_next_to_plume_jax():
    import agents

    assert pathlib.Path(agents.__file__).resolve() == expected_agents_init()
    check_agents_package()


SHADOWS = {
    "module": {"agents.py": "KlinotaxisPolicy = make_agent = None\n"},
    "package": {"agents/__init__.py": "KlinotaxisPolicy = None\n",
                "agents/registry.py": "def make_agent(*a, **k): raise SystemExit(99)\n"
                                      "def is_host_agent(*a): return False\n"},
}


def _folder_with_another_agents(tmp_path: pathlib.Path, kind: str) -> pathlib.Path:
    for name, text in SHADOWS[kind].items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def test_another_agents_in_the_working_folder_stops_plume_jax_loudly(tmp_path):
    """Python puts the working folder first on sys.path, so `import agents` there
    gets the local module; plume_jax's own code must refuse it, naming both.
    (A local agents/ package: the next test in this process, and
    test_the_demo_refuses_a_shadowing_agents_package in a fresh one.)"""
    folder = _folder_with_another_agents(tmp_path, "module")
    code = ("import agents, pathlib; print(pathlib.Path(agents.__file__).resolve()); "
            "from plume_jax.core.agents_package import check_agents_package; "
            "check_agents_package()")
    result = _run_python("-c", code, cwd=folder)
    assert result.stdout.strip().startswith(str(folder.resolve()))
    assert result.returncode != 0
    assert "ImportError" in result.stderr and str(expected_agents_init()) in result.stderr
    assert str(folder.resolve()) in result.stderr


def test_another_agents_package_stops_plume_jax_loudly(tmp_path, monkeypatch):
    """An ``agents/`` package (``agents/__init__.py``) imported in place of
    plume_jax's is refused as the ``agents.py`` module above is, naming both."""
    folder = _folder_with_another_agents(tmp_path, "package")
    spec = importlib.util.spec_from_file_location("agents", folder / "agents" / "__init__.py",
                                                  submodule_search_locations=[])
    local = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(local)
    monkeypatch.setitem(sys.modules, "agents", local)
    with pytest.raises(ImportError) as refused:
        check_agents_package()
    assert str(expected_agents_init()) in str(refused.value)
    assert str(folder / "agents" / "__init__.py") in str(refused.value)


def test_the_demo_refuses_a_shadowing_agents_package(tmp_path):
    folder = _folder_with_another_agents(tmp_path, "package")
    result = _run_python("-m", "plume_jax", "demo", "--num-envs", "2", "--num-steps", "2",
                         "--out", "", cwd=folder)
    assert result.returncode != 0
    assert "not from plume_jax's baseline agents package" in result.stderr


@pytest.mark.skipif(sys.version_info < (3, 11), reason="python -P is new in 3.11")
def test_python_dash_capital_p_gives_plume_jax_agents_despite_a_local_one(tmp_path):
    """The documented way out: -P (PYTHONSAFEPATH) keeps the working folder off
    the front of sys.path."""
    folder = _folder_with_another_agents(tmp_path, "module")
    code = ("import agents, pathlib; print(pathlib.Path(agents.__file__).resolve()); "
            "from plume_jax.core.agents_package import check_agents_package; "
            "check_agents_package()")
    result = _run_python("-P", "-c", code, cwd=folder)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(expected_agents_init())


def test_the_data_extra_brings_pandas():
    """Captures are read with pandas (docs/agents.md): ``plume-jax[data]``
    installs it, at the version CI pins."""
    data = [Requirement(t) for t in PROJECT["optional-dependencies"]["data"]]
    assert "pandas" in {r.name for r in data}
    pins = (ROOT / "constraints.txt").read_text().splitlines()
    assert any(line.startswith("pandas==") for line in pins)
