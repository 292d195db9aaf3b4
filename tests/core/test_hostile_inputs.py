"""Inputs that used to crash with a traceback instead of a one-line error
(issue 42, items 7, 12 and 14): integers too large for a float in the
settings checker, YAML 1.1 forms and duplicate keys in configs and
``--set`` values, and user algorithms that cannot be used."""

from __future__ import annotations

import math
import pathlib

import pytest

from plume_jax import ValidationError
from plume_jax.settings import Angle, real
from plume_jax.settings.checks import grid_position
from plume_jax.core.types import Grid

HUGE = 10**400  # float(HUGE) raises OverflowError


# -- issue 42.7: integers too large for a float ---------------------------------

def test_an_integer_too_large_for_a_float_is_refused_by_the_real_checker_not_overflow():
    with pytest.raises(ValidationError, match=r"^x=<int of \d+ bits> is invalid: expected a "
                       r"finite real number"):
        real(low=0.0)("x", HUGE, None)
    with pytest.raises(ValidationError, match="finite real number of radians"):
        Angle()("heading", -HUGE, None)
    with pytest.raises(ValidationError, match=r"an \(x, y\) pair"):
        grid_position()("start.position", [HUGE, 1], Grid(8, 8))


def test_a_400_digit_learning_rate_given_with_set_is_a_one_line_error():
    from plume_jax.settings import parse_overrides
    from plume_jax.train.config import load_train_config

    overrides = parse_overrides(["algo.learning_rate=" + "9" * 400])
    with pytest.raises(ValidationError, match=r"algo\.learning_rate=<int of \d+ bits> is "
                       r"invalid") as caught:
        load_train_config("configs/train_gaussian.yaml", overrides)
    assert "\n" not in str(caught.value)


# -- issue 42.14: YAML duplicate keys and YAML 1.1 forms ------------------------

def test_a_second_run_section_in_a_config_is_refused_naming_the_key_and_lines(tmp_path):
    from plume_jax.train.config import load_train_config

    text = pathlib.Path("configs/train_gaussian.yaml").read_text()
    path = tmp_path / "twice.yaml"
    path.write_text(text + "run:\n  tensorboard: false\n")
    lines = (text.splitlines().index("run:") + 1, len(text.splitlines()) + 1)
    with pytest.raises(ValidationError, match=rf"the key 'run' is on line {lines[0]} and again "
                       rf"on line {lines[1]}") as caught:
        load_train_config(path)
    assert "\n" not in str(caught.value)


def test_a_repeated_learning_rate_is_refused_not_the_later_value_taken(tmp_path):
    from plume_jax.envs.config_files import load_config
    from plume_jax.train.sweep import load_sweep_config

    path = tmp_path / "lr.yaml"
    path.write_text("algo:\n  learning_rate: 1.0e-3\n  learning_rate: 3.0e-4\n")
    for read in (load_config, load_sweep_config):
        with pytest.raises(ValidationError, match=r"the key 'learning_rate' is on line 2 and "
                           r"again on line 3"):
            read(path)


def test_a_set_value_with_a_key_twice_is_refused():
    from plume_jax.settings import parse_overrides

    with pytest.raises(ValidationError, match=r"^--set='reward=\{type: sparse, type: dense\}' "
                       r"is invalid: .*the key 'type' is on line 1 and again on line 1"):
        parse_overrides(["reward={type: sparse, type: dense}"])


@pytest.mark.parametrize("text, value", [
    # YAML 1.1 forms that YAML 1.2 reads as text
    ("1:25:20", "1:25:20"), ("on", "on"), ("off", "off"), ("yes", "yes"), ("No", "No"),
    ("0b101", "0b101"), ("1_000", "1_000"), ("2001-12-14", "2001-12-14"),
    # YAML 1.2 core schema forms
    ("true", True), ("FALSE", False), ("010", 10), ("0o17", 15), ("0x1400", 5120),
    ("3e-4", 3e-4), ("1e6", 1e6), ("-.inf", -math.inf), ("~", None), ("", None),
])
def test_config_values_are_read_as_yaml_1_2_core_not_yaml_1_1(text, value):
    from plume_jax.files.safe_io import load_yaml_bounded

    got = load_yaml_bounded(text, "--set")
    assert got == value and type(got) is type(value)


def test_strings_that_yaml_1_2_reads_as_numbers_keep_their_type_through_written_yaml():
    """``'0o17'`` and ``'1e6'`` were written unquoted (YAML 1.1 reads them as
    text) and read back as the numbers 15 and 1e6."""
    from plume_jax.files.safe_io import load_yaml_bounded
    from plume_jax.train.config import dump_yaml

    data = {"run": {"name": "0o17", "wandb_project": "1e6", "note": "on", "seed": 3}}
    assert load_yaml_bounded(dump_yaml(data), "config.yaml") == data


def test_tensorboard_on_and_base_60_total_steps_are_refused_not_read_as_true_and_5120():
    from plume_jax.settings import parse_overrides
    from plume_jax.train.config import load_train_config

    with pytest.raises(ValidationError, match=r"run\.tensorboard='on' is invalid: expected a "
                       r"bool"):
        load_train_config("configs/train_gaussian.yaml", parse_overrides(["run.tensorboard=on"]))
    with pytest.raises(ValidationError, match=r"algo\.total_steps='1:25:20' is invalid"):
        load_train_config("configs/train_gaussian.yaml",
                          parse_overrides(["algo.total_steps=1:25:20"]))


# -- issue 42.12: user algorithms and the second Ctrl-C -------------------------

USER_MODULES = {
    "raises_at_import": "raise RuntimeError('no GPU found here')\n",
    "exits_at_import": "import sys\nsys.exit('run me as a script')\n",
    "abstract_algo": (
        "from plume_jax.train.algorithms.base import Algorithm\n\n"
        "class Half(Algorithm):\n"
        "    name = 'half'\n\n"
        "    def init(self, key, hp, env_params):\n"
        "        return None\n"),
}


@pytest.fixture
def user_modules(tmp_path, monkeypatch):
    for name, text in USER_MODULES.items():
        (tmp_path / f"{name}.py").write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    import sys

    for name in USER_MODULES:
        sys.modules.pop(name, None)


def test_a_user_algorithm_module_that_raises_at_import_is_a_one_line_error(user_modules):
    from plume_jax.settings import parse_overrides
    from plume_jax.train.config import load_train_config

    with pytest.raises(ValidationError, match=r"algo\.algorithm='raises_at_import:Algo' is "
                       r"invalid: .*importing module 'raises_at_import' raised RuntimeError: "
                       r"no GPU found here") as caught:
        load_train_config("configs/train_gaussian.yaml",
                          parse_overrides(["algo.algorithm=raises_at_import:Algo"]))
    assert "\n" not in str(caught.value)


def test_a_user_algorithm_module_that_calls_sys_exit_at_import_is_a_one_line_error(
        user_modules):
    """Regression (review): SystemExit is no Exception, so a module calling
    sys.exit() at import ended plume-jax with that message and no context."""
    from plume_jax.train.algorithms.base import algorithm_class

    with pytest.raises(ValidationError, match=r"importing module 'exits_at_import' raised "
                       r"SystemExit: run me as a script"):
        algorithm_class("exits_at_import:Algo")


def test_an_abstract_user_algorithm_is_refused_naming_its_missing_methods_not_nonetype(
        user_modules):
    from plume_jax.train.algorithms.base import algorithm_class
    from plume_jax.train.config import load_train_config

    with pytest.raises(ValidationError, match=r"Half does not implement: from_config, hparams, "
                       r"policy, update"):
        algorithm_class("abstract_algo:Half")
    with pytest.raises(ValidationError, match=r"algo\.algorithm='abstract_algo:Half' is invalid"):
        load_train_config("configs/train_gaussian.yaml", {"algo.algorithm": "abstract_algo:Half"})


def test_a_second_ctrl_c_during_the_graceful_stop_is_one_line_and_exit_130_not_a_traceback(
        monkeypatch, capsys):
    """The command holds train's signal handlers (``stop_on_signals``) and
    gets SIGINT twice, the second while it is stopping."""
    import os
    import signal
    import threading

    from plume_jax import cli
    from plume_jax.train.loop import stop_on_signals

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers are installed only in the main thread")

    def two_ctrl_c(args):
        with stop_on_signals() as stop:
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(10**7):  # the handler runs between bytecodes
                if stop:
                    break
            assert stop.signal_name == "SIGINT"
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(10**7):
                pass
        return 0

    monkeypatch.setitem(cli._COMMANDS, "list", two_ctrl_c)
    assert cli.main(["list"]) == 130
    err = capsys.readouterr().err
    assert err == ("plume-jax: stopped at once by a second SIGINT, without a new checkpoint: "
                   "the run folder keeps its last checkpoint, which --resume continues from\n")
