"""What the docs promise holds for a user who installed the package (issue 55):
the sdist and the wheel are built from a clean checkout (``git archive HEAD``:
the committed files only), the wheel is installed into a fresh virtual
environment, and from an empty folder ``plume-jax demo``, ``plume-jax list
--zoo``, ``plume-jax evaluate`` of a ``zoo:`` agent on a shipped singh240
scenario named by its name, a scenario whose agent is a shipped policy,
``plume-jax configs`` then a short ``plume-jax train`` from a docs config, and
the README's Python quick start all run.

The venv sees this environment's site-packages (``--system-site-packages``)
for the dependencies, so nothing is downloaded (the wheel is installed with
``--no-deps --no-index``); the first check proves that the ``plume_jax`` it
imports is the installed copy, not this checkout (whose editable install's
finder only answers for names nothing earlier on ``sys.path`` has).

Slow suite: about a minute on the 2-core development machine.
"""

from __future__ import annotations

import io
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest

from tests.docs_blocks import tagged

pytestmark = pytest.mark.slow

ROOT = pathlib.Path(__file__).resolve().parents[2]
#: Where the wheel puts the repository's configs/ (setup.py).
INSTALLED = "plume_jax/data/configs/"


def _run(command: list[str], *, cwd: pathlib.Path, env: dict | None = None,
         timeout: float = 300) -> subprocess.CompletedProcess:
    result = subprocess.run(command, cwd=cwd, env=env, text=True, capture_output=True,
                            timeout=timeout)
    assert result.returncode == 0, (f"{' '.join(map(str, command))} failed "
                                    f"({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


def _committed_files(prefix: str) -> set[str]:
    listing = _run(["git", "-C", str(ROOT), "ls-tree", "-r", "--name-only", "HEAD", prefix],
                   cwd=ROOT).stdout
    return set(listing.split())


class Installed:
    """The built sdist and wheel, and a venv with the wheel installed."""

    def __init__(self, work: pathlib.Path):
        self.work = work
        self.source = work / "source"
        self.dist = work / "dist"
        self.venv = work / "venv"
        self.bin = self.venv / "bin"

    def env(self) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items()
               if key not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSAFEPATH", "VIRTUAL_ENV",
                              "PLUME_JAX_ZOO")}
        env["PATH"] = f"{self.bin}{os.pathsep}{env.get('PATH', '')}"
        env["VIRTUAL_ENV"] = str(self.venv)
        return env

    def empty_folder(self, name: str) -> pathlib.Path:
        folder = self.work / "outside" / name
        folder.mkdir(parents=True)
        return folder

    def plume_jax(self, *args: str, cwd: pathlib.Path, timeout: float = 300):
        return _run([str(self.bin / "plume-jax"), *args], cwd=cwd, env=self.env(),
                    timeout=timeout)

    def python(self, *args: str, cwd: pathlib.Path, timeout: float = 300):
        return _run([str(self.bin / "python"), *args], cwd=cwd, env=self.env(), timeout=timeout)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout")
    import setuptools
    from packaging.version import Version

    if Version(setuptools.__version__) < Version("70.1"):  # builds wheels by itself from 70.1
        pytest.skip(f"setuptools {setuptools.__version__} here; the offline build needs >= 70.1")
    out = Installed(tmp_path_factory.mktemp("wheel_install"))
    # a clean checkout: what HEAD commits, nothing of this work tree's edits
    tar_bytes = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", "HEAD"],
                               capture_output=True, check=True, timeout=120).stdout
    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(out.source, filter="data")
        else:  # Python < 3.10.12 / 3.11.4: our own repository's archive
            tar.extractall(out.source)
    # the sdist (PEP 517 hook, no network), then the wheel built from the sdist, as pip does
    build_sdist = (f"from setuptools import build_meta; "
                   f"print(build_meta.build_sdist({str(out.dist)!r}))")
    _run([sys.executable, "-c", build_sdist], cwd=out.source)
    (sdist,) = out.dist.glob("plume_jax-*.tar.gz")
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
          "--no-index", "-w", str(out.dist), str(sdist)], cwd=out.work)
    _run([sys.executable, "-m", "venv", "--system-site-packages", str(out.venv)], cwd=out.work)
    (wheel,) = out.dist.glob("plume_jax-*.whl")
    _run([str(out.bin / "python"), "-m", "pip", "install", "--no-deps", "--no-index",
          str(wheel)], cwd=out.work, env=out.env())
    return out


def test_the_sdist_and_the_wheel_carry_every_committed_config(installed):
    """The zoo (every entry's policy, config and seeds), the scenarios and the
    example configs: every file git commits under configs/."""
    committed = _committed_files("configs")
    assert any(name.startswith("configs/zoo/") for name in committed)
    assert "configs/scenarios/singh2023_constant.yaml" in committed
    (sdist,) = installed.dist.glob("plume_jax-*.tar.gz")
    with tarfile.open(sdist) as tar:
        in_sdist = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    assert committed <= in_sdist, sorted(committed - in_sdist)[:5]
    (wheel,) = installed.dist.glob("plume_jax-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        in_wheel = {"configs/" + name.removeprefix(INSTALLED)
                    for name in archive.namelist() if name.startswith(INSTALLED)}
    assert in_wheel == committed, (sorted(committed - in_wheel)[:5],
                                   sorted(in_wheel - committed)[:5])


def test_the_venv_imports_the_installed_copy_not_the_checkout(installed):
    folder = installed.empty_folder("imports")
    code = ("import pathlib, plume_jax, agents, agents.zoo; "
            "from plume_jax.files import shipped; "
            "print(pathlib.Path(plume_jax.__file__).resolve()); "
            "print(pathlib.Path(agents.__file__).resolve()); "
            "print(shipped.configs_root()); print(agents.zoo.ZOO_ROOT)")
    lines = installed.python("-c", code, cwd=folder).stdout.split()
    site = (installed.venv / "lib").resolve()
    for line in lines:
        path = pathlib.Path(line)
        assert path.is_relative_to(site), f"{line} is not in the venv's {site}"
        assert not path.is_relative_to(ROOT), line
    assert lines[2].endswith("site-packages/plume_jax/data/configs")
    assert lines[3] == lines[2] + "/zoo"


def test_demo_runs_outside_the_checkout(installed):
    folder = installed.empty_folder("demo")
    result = installed.plume_jax("demo", "--num-envs", "8", "--num-steps", "20", "--quiet",
                                 cwd=folder)
    assert "success rate:" in result.stdout
    assert (folder / "plume_jax_demo.png").is_file()


def test_list_zoo_and_scenarios_read_the_installed_copy(installed):
    folder = installed.empty_folder("list")
    zoo = installed.plume_jax("list", "--zoo", cwd=folder).stdout
    assert "site-packages/plume_jax/data/configs/zoo" in zoo
    assert "zoo:singh2023-constant-gru@1" in zoo and "zoo:gaussian-gru@1" in zoo
    scenarios = installed.plume_jax("list", "--scenarios", cwd=folder).stdout
    assert "singh2023_constant" in scenarios and "poisson_iso19x19_learned" in scenarios


def test_evaluate_a_zoo_agent_on_a_singh240_scenario_by_name(installed):
    folder = installed.empty_folder("evaluate_zoo")
    result = installed.plume_jax("evaluate", "--scenario", "singh2023_constant",
                                 "--agent", "zoo:singh2023-constant-gru", "--episodes", "4",
                                 "--out", "eval", "--quiet", cwd=folder)
    assert "| zoo:singh2023-constant-gru | 4 |" in result.stdout
    assert "4 of the 240 starts" in result.stdout
    assert (folder / "eval" / "summary.md").is_file()


def test_evaluate_a_scenario_whose_agent_is_a_shipped_policy(installed):
    """poisson_iso19x19_learned names ``path: configs/policies/...``: run by
    name from an empty folder, that path is read from the installed copy."""
    folder = installed.empty_folder("evaluate_policy")
    result = installed.plume_jax("evaluate", "--scenario", "poisson_iso19x19_learned",
                                 "--episodes", "4", "--out", "eval", "--quiet", cwd=folder)
    assert "| trained | 4 |" in result.stdout


def test_configs_then_train_from_a_docs_config(installed):
    folder = installed.empty_folder("train")
    written = installed.plume_jax("configs", cwd=folder).stdout
    assert "site-packages/plume_jax/data/configs" in written
    assert (folder / "configs" / "train_gaussian.yaml").is_file()
    assert (folder / "configs" / "zoo").is_dir()
    installed.plume_jax(
        "train", "--config", "configs/train_gaussian.yaml", "--set", "algo.total_steps=512",
        "--set", "algo.num_envs=8", "--set", "algo.num_steps=32", "--set", "eval.num_envs=4",
        "--set", "eval.num_steps=20", "--set", "run.tensorboard=false", "--out", "runs/g",
        "--quiet", cwd=folder)
    assert (folder / "runs" / "g" / "policy").is_dir()
    assert (folder / "runs" / "g" / "summary.json").is_file()


def test_the_readme_quick_start_runs_outside_the_checkout(installed):
    """The README's Python quick start, at the sizes tests/docs/test_readme.py
    runs it (64 episodes, 50 steps)."""
    folder = installed.empty_folder("quickstart")
    code = tagged("quickstart")[0].replace("4096", "64").replace("1000", "50")
    (folder / "quickstart.py").write_text(
        code + "\nimport pathlib\nprint(pathlib.Path(plume_jax.__file__).resolve())\n"
        "print(obs3.shape, rewards.shape)\n")
    out = installed.python("quickstart.py", cwd=folder).stdout.splitlines()
    assert out[-1] == "(3, 1) (50, 64)"
    assert pathlib.Path(out[-2]).is_relative_to(installed.venv.resolve())
