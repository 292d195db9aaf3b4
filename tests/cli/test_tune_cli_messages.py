"""``plume-jax tune``'s own lines: what a new study needs when an option is
missing, and where the best trial's folder is."""

from __future__ import annotations

import pytest

from plume_jax import cli


@pytest.mark.parametrize("missing", ["--config", "--space", "--trials"])
def test_a_new_study_without_config_space_or_trials_names_what_to_give(missing, tmp_path,
                                                                      capsys):
    """Regression: ``plume-jax tune --config C --space S`` (no --trials) said
    "--trials=None is invalid: expected a value (or --resume DIR)"."""
    given = {"--config": "configs/train_gaussian.yaml", "--space": "configs/tune_gaussian.yaml",
             "--trials": "2"}
    del given[missing]
    argv = ["tune", "--out", str(tmp_path / "t"), *(x for kv in given.items() for x in kv)]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "=None" not in err
    assert err.startswith(f"plume-jax: error: {missing} is required to start a study: ")
    assert err.endswith("(or --resume DIR to continue one)")
    assert not (tmp_path / "t").exists()


def test_the_best_trial_line_names_its_folder(tmp_path, capsys, monkeypatch):
    """Regression: the closing line said "best trial 3: ..." and the folder
    was ``trials/00003``, which nothing printed (the docs' table says
    ``trials/<number>/``)."""
    import plume_jax.train.tune as tune

    out = tmp_path / "study"
    monkeypatch.setattr(tune, "new_record", lambda *a, **k: {"out": str(out)})
    monkeypatch.setattr(tune, "tune", lambda record, **k: {"best": {
        "trial": 3, "value": 0.32, "params": {"algo.learning_rate": 1e-3},
        "folder": "trials/00003", "mean_steps_to_goal": 5.9}})
    assert cli.main(["tune", "--config", "c.yaml", "--space", "s.yaml", "--trials", "4",
                     "--quiet"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(f"best trial 3 ({out}/trials/00003): greedy success 0.320, 5.9 "
                            "steps to the goal")
