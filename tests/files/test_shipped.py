"""plume_jax.files.shipped: one lookup of the shipped ``configs/`` (the
checkout's, else the copy a wheel carries), scenarios by name, ``plume-jax
configs`` (issue 55). The installed layout itself is exercised end to end by
the slow ``tests/repo/test_wheel_install.py``; here the installed copy is a
small folder that stands in for ``plume_jax/data/configs``.
"""

from __future__ import annotations

import contextlib
import io
import pathlib
import shutil

import pytest

from plume_jax.core.errors import ValidationError
from plume_jax.files import shipped

ROOT = pathlib.Path(__file__).resolve().parents[2]
LEARNED = "poisson_iso19x19_learned"  # a shipped scenario whose agent is a shipped policy


@pytest.fixture()
def installed(tmp_path, monkeypatch) -> pathlib.Path:
    """plume_jax as if installed from a wheel: no checkout beside it, the
    shipped folder at a stand-in for ``plume_jax/data/configs``."""
    copy = tmp_path / "site" / "plume_jax" / "data" / "configs"
    (copy / "scenarios" / "recorded").mkdir(parents=True)
    for name in ("singh2023_constant.yaml", f"{LEARNED}.yaml"):
        shutil.copy(ROOT / "configs" / "scenarios" / name, copy / "scenarios" / name)
    shutil.copy(ROOT / "configs" / "scenarios" / "recorded" / "crimaldi_klinotaxis.yaml",
                copy / "scenarios" / "recorded" / "crimaldi_klinotaxis.yaml")
    shutil.copytree(ROOT / "configs" / "policies" / "poisson_iso19x19_searcher",
                    copy / "policies" / "poisson_iso19x19_searcher")
    (copy / "train_gaussian.yaml").write_text("algo: {}\n")
    monkeypatch.setattr(shipped, "_in_checkout", lambda: False)
    monkeypatch.setattr(shipped, "INSTALLED_CONFIGS", copy)
    return copy


def test_a_checkout_reads_its_own_configs():
    assert shipped.configs_root() == ROOT / "configs"
    assert shipped.shipped_path("zoo") == ROOT / "configs" / "zoo"
    assert "checkout" in shipped.describe_root()


def test_an_installed_package_reads_its_copy(installed):
    assert shipped.configs_root() == installed
    assert shipped.shipped_path("scenarios", "x.yaml") == installed / "scenarios" / "x.yaml"
    assert shipped.describe_root() == f"the installed package's {installed}"
    assert list(shipped.scenario_names()) == ["crimaldi_klinotaxis", LEARNED, "singh2023_constant"]


def test_a_scenario_by_its_file_stem_or_its_own_name(installed):
    path = installed / "scenarios" / "singh2023_constant.yaml"
    assert shipped.scenario_path("singh2023_constant") == path
    assert shipped.scenario_path("singh2023-constant") == path  # its name: key
    assert shipped.scenario_path("crimaldi_klinotaxis") == installed / "scenarios" / "recorded" / \
        "crimaldi_klinotaxis.yaml"


def test_an_unknown_scenario_name_is_one_line_naming_the_closest_and_all(installed):
    with pytest.raises(ValidationError) as caught:
        shipped.scenario_path("singh2023_constnt")
    message = str(caught.value)
    assert "\n" not in message and "--scenario" in message
    assert "singh2023_constant" in message and LEARNED in message
    assert str(installed / "scenarios") in message


def test_names_and_paths_are_told_apart():
    assert shipped.is_scenario_name("singh2023_constant")
    assert shipped.is_scenario_name("singh2023-constant")
    for path in ("configs/scenarios/x.yaml", "x.yaml", "./x", "/abs/x", ""):
        assert not shipped.is_scenario_name(path), path


def test_a_shipped_scenarios_policy_is_read_from_the_shipped_folder(installed, tmp_path,
                                                                  monkeypatch):
    """Regression (issue 55): a scenario run by name outside the checkout
    named its policy ``configs/policies/...``, relative to a working folder
    that has no configs/."""
    from plume_jax.evaluate.scenario import load_scenario

    work = tmp_path / "empty"
    work.mkdir()
    monkeypatch.chdir(work)
    scenario = load_scenario(installed / "scenarios" / f"{LEARNED}.yaml")
    assert scenario["agent"]["params"]["path"] == \
        str(installed.parent / "configs" / "policies" / "poisson_iso19x19_searcher")
    # a scenario of the user's own keeps its path relative to the working folder
    own = work / "mine.yaml"
    shutil.copy(installed / "scenarios" / f"{LEARNED}.yaml", own)
    assert load_scenario(own)["agent"]["params"]["path"] == \
        "configs/policies/poisson_iso19x19_searcher"
    # and a working folder that has the path keeps it (a copy written by plume-jax configs)
    (work / "configs" / "policies" / "poisson_iso19x19_searcher").mkdir(parents=True)
    scenario = load_scenario(installed / "scenarios" / f"{LEARNED}.yaml")
    assert scenario["agent"]["params"]["path"] == "configs/policies/poisson_iso19x19_searcher"


def test_copy_configs_writes_the_whole_folder_or_nothing(installed, tmp_path):
    out = shipped.copy_configs(tmp_path / "work" / "configs")
    assert (out / "train_gaussian.yaml").read_text() == "algo: {}\n"
    assert (out / "scenarios" / "recorded" / "crimaldi_klinotaxis.yaml").is_file()
    before = sorted(p.name for p in out.parent.iterdir())
    with pytest.raises(ValidationError, match="--out.*a path that does not exist yet"):
        shipped.copy_configs(out)
    assert sorted(p.name for p in out.parent.iterdir()) == before == ["configs"]


def test_copy_configs_without_a_shipped_folder_says_so(installed, tmp_path):
    shutil.rmtree(installed)
    with pytest.raises(ValidationError, match="there is none at"):
        shipped.copy_configs(tmp_path / "configs")
    assert not (tmp_path / "configs").exists()


def _cli(*argv: str) -> tuple[int, str, str]:
    from plume_jax import cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(list(argv))
        except SystemExit as stop:
            code = stop.code
    return code, out.getvalue(), err.getvalue()


def test_plume_jax_configs_and_list_scenarios(installed, tmp_path):
    files = sum(1 for path in installed.rglob("*") if path.is_file())
    code, out, _ = _cli("configs", "--out", str(tmp_path / "c"))
    assert code == 0 and out == f"wrote {tmp_path / 'c'} ({files} files, copied from {installed})\n"
    code, _, err = _cli("configs", "--out", str(tmp_path / "c"))
    assert code == 2 and err.count("\n") == 1 and "does not exist yet" in err
    code, out, _ = _cli("list", "--scenarios")
    assert code == 0 and str(installed / "scenarios") in out
    assert "singh2023_constant" in out and LEARNED in out


def test_evaluate_refuses_an_unknown_scenario_name_in_one_line(installed, tmp_path,
                                                             monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = _cli("evaluate", "--scenario", "singh2023_constnt", "--out", "o")
    assert code == 2 and err.count("\n") == 1
    assert "singh2023_constant" in err and not (tmp_path / "o").exists()
