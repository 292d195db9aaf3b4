"""The README's commands and quick start work as written."""

from __future__ import annotations

import pathlib
import re

from tests.docs_blocks import tagged

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.S)


def test_ci_runs_exactly_the_readme_test_command_then_the_slow_tests():
    test_command = _blocks("bash")[1].strip()
    ci_lines = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines()
                if ln.strip() and not ln.startswith("#")]
    assert ci_lines[-2] == test_command
    assert ci_lines[-1].startswith("python -m pytest -m slow")


def test_readme_setup_command_runs_the_demo():
    assert _blocks("bash")[0].strip() == "pip install -e . && plume-jax demo"


def test_quick_start_runs():
    code = tagged("quickstart")[0]
    namespace: dict = {}
    exec(compile(code.replace("4096", "64").replace("1000", "50"), "README quick start", "exec"),
         namespace)
    assert namespace["obs3"].shape == (3, 1)
    assert namespace["rewards"].shape == (50, 64)


def _console_command(marker: str) -> list[str]:
    """The README console command holding ``marker``, as argv after ``plume-jax``."""
    import shlex

    for block in _blocks("console"):
        for command in block.replace("\\\n", " ").splitlines():
            command = command.removeprefix("$ ").strip()
            if marker in command:
                argv = shlex.split(command, comments=True)
                assert argv[0] == "plume-jax", command
                return argv[1:]
    raise LookupError(f"no README console command holds {marker!r}")


def test_readme_comparison_example_runs_on_its_scenario(tmp_path, monkeypatch):
    """Issue 30 item 1: the README's first comparison example named
    cast_and_surge, which needs a wind sensor the Gaussian preset lacks, and
    exited 2. Run its exact agent list on its scenario, with a policy of the
    shapes `train --config configs/train_gaussian.yaml` exports, on 2 episodes."""
    import json

    import yaml

    import plume_jax
    from plume_jax import cli
    from tests.policy_folders import write_policy_folder

    argv = _console_command("trained.path=runs/train_gaussian/policy")
    config = yaml.safe_load((ROOT / "configs" / "train_gaussian.yaml").read_text())
    env, params = plume_jax.make(config["env"]["id"], **config["env"].get("overrides", {}))
    write_policy_folder(tmp_path / "runs" / "train_gaussian" / "policy", env, params)
    monkeypatch.chdir(tmp_path)
    argv = [str(ROOT / a) if a.startswith("configs/") else a for a in argv]
    code = cli.main([*argv, "--episodes", "2", "--out", "eval_out", "--quiet"])
    assert code in (0, 1)  # 1 only if klinotaxis missed its expectation on 2 episodes
    labels = {json.loads(p.read_text())["agent"]["label"]
              for p in (tmp_path / "eval_out").glob("*.json")}
    agents = argv[argv.index("--agent") + 1:argv.index("--agent-param")]
    assert labels == set(agents) and "trained" in labels
