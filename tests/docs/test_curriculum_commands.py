"""The curriculum's console commands in docs/training.md and docs/singh2023.md
("Their curriculum") run as written: stage 2's sweep finds stage 1 where the
documented stage-1 command puts it (its ``run.init_from`` is that ``--out``),
and the labels the evaluation loop adds are ones the script accepts. The
slow test runs the documented sweeps through the CLI on a one-update budget."""

from __future__ import annotations

import pathlib
import re
import shlex

import pytest

from tests.docs_blocks import ROOT

_CONSOLE = re.compile(r"^```console\n(.*?)^```", flags=re.S | re.M)
PAGES = (ROOT / "docs" / "training.md", ROOT / "docs" / "singh2023.md")


def curriculum_sweeps(page: pathlib.Path) -> list[list[str]]:
    """The ``plume-jax sweep`` commands of ``page``'s console blocks that run
    a curriculum config, as argv after ``plume-jax``."""
    commands = []
    for block in _CONSOLE.findall(page.read_text()):
        for line in block.replace("\\\n", " ").splitlines():
            if line.startswith("plume-jax sweep") and "curriculum" in line:
                commands.append(shlex.split(line)[1:])
    return commands


def _option(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_stage_two_continues_from_where_stage_one_is_written(page):
    from plume_jax.train.sweep import load_sweep_config

    commands = curriculum_sweeps(page)
    assert commands and len(commands) % 2 == 0, "the curriculum's commands come in stage pairs"
    for stage1, stage2 in zip(commands[::2], commands[1::2]):
        assert "stage1" in _option(stage1, "--config")
        assert "stage1" not in _option(stage2, "--config")
        sweep = load_sweep_config(ROOT / _option(stage2, "--config"))
        assert {c.run["init_from"] for c in sweep.configs} == {_option(stage1, "--out")}
        assert load_sweep_config(ROOT / _option(stage1, "--config")).names == sweep.names


def test_every_curriculum_sweep_config_chains_its_own_stage_one():
    """The RNN's too: each stage-2 sweep's run.init_from is the folder its
    stage-1 sweep's documented command writes, runs/<stage-1 config name minus
    'sweep_'>."""
    from plume_jax.train.sweep import load_sweep_config

    for stage2 in sorted((ROOT / "configs").glob("sweep_seeds_singh2023-curriculum-*.yaml")):
        if stage2.stem.endswith("-stage1"):
            continue
        stage1 = stage2.with_name(f"{stage2.stem}-stage1.yaml")
        sweep = load_sweep_config(stage2)
        assert {c.run["init_from"] for c in sweep.configs} == \
            {f"runs/{stage1.stem.removeprefix('sweep_')}"}, stage2.name
        first = load_sweep_config(stage1)
        assert first.names == sweep.names
        assert first.configs[0].network == sweep.configs[0].network  # one network, two stages


def test_the_evaluation_loop_adds_labels_the_script_accepts():
    from scripts.bench import singh_recipes as recipes

    text = (ROOT / "docs" / "singh2023.md").read_text()
    loops = list(re.finditer(r"for regime in ([a-z_0-9 ]+); do\n\s+python "
                             r"scripts/bench/singh_recipes.py --add \$regime-(\w+)-([\w-]+)=(\S+)",
                             text))
    assert len(loops) >= 2, "the evaluation loops of 'Their curriculum' are not where the test reads them"
    for loop in loops:
        regimes, net, variant, _ = loop.groups()
        assert sorted(regimes.split()) == sorted(recipes.REGIMES)
        for regime in regimes.split():
            assert recipes.regime_of(f"{regime}-{net}-{variant}") == regime


@pytest.mark.slow
def test_the_documented_sweeps_run_on_a_one_update_budget(tmp_path, monkeypatch):
    from plume_jax.cli import main
    from scripts.bench import singh_recipes as recipes

    monkeypatch.chdir(tmp_path)  # the commands' relative runs/ folders land here
    # one update of 8 envs x 128 steps (each Singh reset warms its plume up for 30 s of
    # puff steps: at the configs' 64 envs, 2 members, the test took 440 s on 2 cores)
    tiny = ["--set", "algo.num_envs=8", "--set", "algo.total_steps=1024",
            "--set", "eval.num_envs=4", "--set", "eval.num_steps=8",
            "--set", "grid.run.seed=[0, 1]", "--quiet"]
    for argv in curriculum_sweeps(ROOT / "docs" / "singh2023.md"):
        argv = [str(ROOT / a) if a.startswith("configs/") else a for a in argv]
        assert main([*argv, *tiny]) == 0, argv
    stage2 = tmp_path / "runs" / "seeds_singh2023-curriculum-gru"
    results = recipes.check("constant-gru-curriculum", stage2)
    assert recipes.earlier_stage(results) == pathlib.Path("runs/seeds_singh2023-curriculum-gru-stage1")
