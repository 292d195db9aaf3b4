"""The training loop places the progress bar by the config's
``steps_per_update`` only: the bar's total, the notes, the periodic
evaluations' lines and the metrics rows count env steps so, and the loop
once placed its "compiling" line and each chunk's SPS start by the
algorithm's own ``steps_per_update`` instead (the same number for every
shipped algorithm, by :class:`~plume_jax.train.algorithms.base.Algorithm`'s
contract, but two sources for one count)."""

from __future__ import annotations

from plume_jax.train.config import train_config
from plume_jax.train.loop import Member, build_program, init_runner, train_program
from tests.train.test_call_depth import TINY as CALL_DEPTH_TINY

#: test_call_depth's tiny run, 3 updates of 32 env steps, no evaluation.
TINY = {**CALL_DEPTH_TINY, "algo": {**CALL_DEPTH_TINY["algo"], "total_steps": 3 * 4 * 8}}


class Bar:
    """A progress bar that records where each line was placed."""

    def __init__(self) -> None:
        self.lines: list[tuple[float, str]] = []

    def update(self, at: float, message: str = "") -> None:
        self.lines.append((at, message))

    def restart_clock(self, at: float) -> None:
        self.lines.append((at, "restart_clock"))


def test_the_compiling_line_of_a_resumed_run_is_placed_by_the_configs_steps_per_update():
    config = train_config(TINY)
    env, env_params = config.make_env()
    p = build_program([Member(config, env, env_params)], batched=False)
    runner = init_runner(p)
    runner = runner.replace(update=runner.update + 1)  # as if resumed at update 1
    p.algo.steps_per_update = 1000  # an algorithm that counts otherwise: not the bar's unit
    bar = Bar()
    result = train_program(p, runner, [[]], bar=bar)
    assert result.update == 3
    compiling = [at for at, message in bar.lines if message.startswith("compiling")]
    assert compiling == [1 * config.steps_per_update]
    assert all(at <= 3 * config.steps_per_update for at, _ in bar.lines)
