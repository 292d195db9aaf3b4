"""Running one compiled training program in chunks, with checkpoints in
between (used by ``train`` and by every program of a ``sweep``).

The program is ``PPO.run`` compiled once with a *dynamic* number of updates
per call (``count``), so any chunk length reuses it, and splitting a run
into chunks of any lengths gives bit-for-bit the results of one call. The
host chooses each chunk's length (:func:`next_chunk`): up to the end, the
next ``checkpoint_every`` multiple, about :data:`REPORT_SECONDS` of
training (so metrics reach the disk regularly) and the time left until a
timed checkpoint (``checkpoint_minutes``) is due. After every chunk
``on_chunk`` gets its metrics; when a checkpoint is due ``on_checkpoint``
gets the runner.

With several processes (:mod:`plume_jax.train.distributed`) every process
runs the same calls: the chunk lengths and the checkpoint decisions are
process 0's (:func:`~plume_jax.train.distributed.agree`), and the metrics
are gathered to every process before ``on_chunk``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import signal
import threading
import time
from typing import Any, Callable, Iterator, Sequence

import jax

from plume_jax.progress import ProgressBar
from plume_jax.train.distributed import agree, host_copy

#: Seconds of training between two host visits (metrics written, checkpoint
#: due?); the chunk lengths follow from the measured speed.
REPORT_SECONDS = 30.0

#: Most updates one call of the compiled program runs (the length of its
#: metrics buffer).
MAX_CHUNK = 4096


def checkpointer(folder: Any, meta: Callable[[int], dict[str, Any]]
                 ) -> Callable[[Any, int, bool], None]:
    """The ``on_checkpoint`` of :func:`run_in_chunks` for a run or sweep
    program whose checkpoints go to ``folder/checkpoint`` (and, when kept,
    ``folder/checkpoints/update_<N>``) with the metadata ``meta(update)``.
    With several processes every process takes part in gathering the state
    (a collective); process 0 alone writes."""
    from plume_jax.train.checkpoint import save_checkpoint
    from plume_jax.train.distributed import is_main_process

    def on_checkpoint(state: Any, update: int, kept: bool) -> None:
        if jax.process_count() > 1:
            state = host_copy(state)  # every process: a collective
        if not is_main_process():
            return
        save_checkpoint(folder / "checkpoint", state, meta(update))
        if kept:
            save_checkpoint(folder / "checkpoints" / f"update_{update:08d}", state, meta(update))

    return on_checkpoint


def next_chunk(done: int, num_updates: int, *, every: int | None, seconds_per_update: float | None,
               seconds_to_checkpoint: float | None, max_chunk: int = MAX_CHUNK,
               eval_every: int | None = None) -> int:
    """How many updates the next call runs (see the module docstring); the
    first chunk (speed not measured yet) is one update. A chunk also ends
    at every ``eval_every`` multiple (a periodic evaluation)."""
    n = min(num_updates - done, max_chunk)
    for period in (every, eval_every):
        if period:
            n = min(n, period - done % period)
    if seconds_per_update is None:
        return 1
    spu = max(seconds_per_update, 1e-9)
    n = min(n, max(1, math.floor(REPORT_SECONDS / spu)))
    if seconds_to_checkpoint is not None:
        n = min(n, max(1, math.ceil(seconds_to_checkpoint / spu)))
    return max(1, n)


@dataclasses.dataclass
class ChunkStats:
    """Timings of :func:`run_in_chunks`; ``interrupted``: the run stopped
    early on a stop request (:func:`stop_on_signals`), after checkpointing."""

    compile_seconds: float = 0.0
    train_seconds: float = 0.0
    checkpoint_seconds: float = 0.0
    checkpoints: int = 0
    interrupted: str | None = None


class Interrupted(Exception):
    """A run stopped on SIGINT or SIGTERM after checkpointing (raised by
    ``train`` / ``sweep``; the CLI turns it into one line saying how to
    resume, exit status 130 or 143).

    Attributes: ``signal_name`` (``"SIGINT"``), ``update`` (the update the
    checkpoint holds) and ``resume`` (the command that continues the run).
    """

    def __init__(self, signal_name: str, update: int, resume: str):
        super().__init__(f"interrupted by {signal_name} at update {update}: the checkpoint is "
                         f"saved; continue with: {resume}")
        self.signal_name = signal_name
        self.update = update
        self.resume = resume


class StoppedAtOnce(KeyboardInterrupt):
    """A second SIGINT while a run was already stopping (:func:`stop_on_signals`):
    the run stops at once, without a new checkpoint (the CLI says so in one
    line, exit status 130)."""

    def __init__(self) -> None:
        super().__init__("stopped at once by a second SIGINT, without a new checkpoint: the "
                         "run folder keeps its last checkpoint, which --resume continues from")


class StopRequest:
    """Set by :func:`stop_on_signals` when a stop was asked for (the signal's name)."""

    def __init__(self) -> None:
        self.signal_name: str | None = None

    def __bool__(self) -> bool:
        return self.signal_name is not None


@contextlib.contextmanager
def stop_on_signals() -> Iterator[StopRequest]:
    """While the block runs, the first SIGINT (Ctrl-C) or SIGTERM (what a
    scheduler sends before it kills a job) asks the run to stop at the end of
    the current chunk, checkpointed, instead of killing it; a second SIGINT
    interrupts at once (:class:`StoppedAtOnce`, a ``KeyboardInterrupt``).
    Handlers are installed only in the main thread (elsewhere the block runs
    as it is) and restored after."""
    request = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield request
        return
    previous = {}

    def handler(signum: int, frame: Any) -> None:
        if request.signal_name is not None and signum == signal.SIGINT:
            raise StoppedAtOnce
        request.signal_name = signal.Signals(signum).name

    for sig in (signal.SIGINT, signal.SIGTERM):
        previous[sig] = signal.signal(sig, handler)
    try:
        yield request
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def compile_program(algo: Any, runner: Any, hp: Any, env_params: Any, num_updates: int,
                    callback: Callable | None, log_every: int, batched: bool = False) -> Any:
    """``algo.run`` (an :class:`~plume_jax.train.algorithms.base.Algorithm`) with a
    dynamic update count, compiled once."""
    fn = jax.jit(functools.partial(algo.run, num_updates=min(num_updates, MAX_CHUNK),
                                   callback=callback, log_every=log_every, batched=batched))
    return fn.lower(runner, hp, env_params, count=1).compile()


def run_in_chunks(algo: Any, runner: Any, hp: Any, env_params: Any, *, done: int,
                  num_updates: int, log_every: int, bar: ProgressBar, printer: Any,
                  bar_offset: float, bar_scale: float,
                  on_chunk: Callable[[dict[str, Any], int], None] | None = None,
                  on_checkpoint: Callable[[Any, int, bool], None] | None = None,
                  every: int | None = None, minutes: float | None = None,
                  batched: bool = False, label: str = "",
                  stop: StopRequest | None = None, eval_every: int | None = None,
                  on_evaluation: Callable[[Any, int], None] | None = None,
                  phases: Sequence[tuple[int, Any]] | None = None
                  ) -> tuple[Any, ChunkStats]:
    """Train from update ``done`` to ``num_updates``.

    Args:
        algo, runner, hp, env_params: as for ``PPO.run`` (``batched``: with
            a leading member axis).
        bar, printer: the progress bar and the program's callback
            (:class:`plume_jax.train.progress.Progress`); the bar is at
            ``bar_offset + bar_scale * env_steps``.
        on_chunk: ``(metrics, done)`` after every chunk, metrics stacked
            over the chunk's updates (host arrays).
        on_checkpoint: ``(runner, done, kept)`` when a checkpoint is due
            (``kept``: a ``checkpoint_every`` multiple before the end) and at
            the end. None: no chunks but the first, no checkpoints.
        every, minutes: ``run.checkpoint_every`` / ``run.checkpoint_minutes``.
        stop: a :class:`StopRequest`; when it is set after a chunk, the run
            checkpoints and returns early (``stats.interrupted``).
        eval_every, on_evaluation: ``(runner, done)`` at every ``eval_every``
            multiple (chunks end there), after that update's checkpoint, so a
            periodic evaluation's results are never ahead of the checkpoints.
        phases: ``(from_update, algo)`` pairs, ``from_update`` 0 first and
            increasing (a ``run.lanes`` width schedule): updates from each
            ``from_update`` to the next run ``algo``'s program (each
            compiled with the same ``num_updates`` when first reached; a
            chunk ends at every ``from_update``; the speed is measured
            anew after a switch). None: ``algo`` throughout.

    Returns ``(runner, stats)``.
    """
    stats = ChunkStats()
    if done >= num_updates:
        return runner, stats
    steps = algo.steps_per_update
    starts = [0] if not phases else [int(start) for start, _ in phases]
    algos = [algo] if not phases else [a for _, a in phases]
    programs: dict[int, Any] = {}

    def compiled(k: int) -> Any:
        """Phase ``k``'s program, compiled when first asked for."""
        if k not in programs:
            what = "compiling the training program" + (
                f" (from update {starts[k]})" if len(starts) > 1 else "")
            bar.update(bar_offset + bar_scale * done * steps,
                       message=f"{label + ' | ' if label else ''}{what}")
            t0 = time.perf_counter()
            programs[k] = compile_program(algos[k], runner, hp, env_params, num_updates,
                                          printer, log_every, batched)
            stats.compile_seconds += time.perf_counter() - t0
            bar.restart_clock(bar_offset + bar_scale * done * steps)
        return programs[k]

    interval = None if minutes is None or on_checkpoint is None else 60.0 * minutes
    last_checkpoint = time.monotonic()
    seconds_per_update = None
    phase = None
    while done < num_updates:
        k = max(i for i, start in enumerate(starts) if start <= done)
        if k != phase:  # a new phase: its program, its speed not measured yet
            phase, seconds_per_update = k, None
            program = compiled(k)
        if on_checkpoint is None:  # nothing to write between chunks; evaluations end them
            n = min(num_updates - done, MAX_CHUNK)
            if on_evaluation is not None and eval_every:
                n = min(n, eval_every - done % eval_every)
        else:
            left = None if interval is None else interval - (time.monotonic() - last_checkpoint)
            n = agree(next_chunk(done, num_updates, every=every,
                                 seconds_per_update=seconds_per_update,
                                 seconds_to_checkpoint=left, eval_every=eval_every))
        if k + 1 < len(starts):  # the chunk ends where the next phase starts
            n = min(n, starts[k + 1] - done)
        printer.restart(done * steps)
        t0 = time.perf_counter()
        runner, metrics = program(runner, hp, env_params, count=n)
        jax.block_until_ready(runner)
        elapsed = time.perf_counter() - t0
        stats.train_seconds += elapsed
        seconds_per_update = elapsed / n
        done += n
        if on_chunk is not None:
            on_chunk(host_copy(jax.tree.map(lambda x: x[:n], metrics)), done)
        stopping = False
        if stop is not None and bool(agree(bool(stop))):
            stopping = True
            stats.interrupted = stop.signal_name or "a stop request"
        # the evaluation due after this chunk, or None
        evaluate = on_evaluation if eval_every and done % eval_every == 0 else None
        if on_checkpoint is None:
            if evaluate is not None:
                evaluate(runner, done)
            if stopping or _stop_after_evaluation(stop, evaluate, stats):
                break
            continue
        kept = bool(every and done % every == 0 and done < num_updates)
        timed = bool(agree(interval is not None and (time.monotonic() - last_checkpoint
                                                     + 0.5 * seconds_per_update >= interval)))
        if kept or timed or stopping or evaluate is not None or done == num_updates:
            t0 = time.perf_counter()
            on_checkpoint(runner, done, kept)
            stats.checkpoint_seconds += time.perf_counter() - t0
            stats.checkpoints += 1
            last_checkpoint = time.monotonic()
        if evaluate is not None:
            evaluate(runner, done)
        if stopping or _stop_after_evaluation(stop, evaluate, stats):
            break
    return runner, stats


def _stop_after_evaluation(stop: StopRequest | None, evaluate: Any, stats: ChunkStats) -> bool:
    """Whether ``stop`` was set by the evaluation just run (a tuner's
    pruning decision, :mod:`plume_jax.train.tune`): the run returns there,
    its checkpoint of that update already written, ``stats.interrupted``
    set."""
    if evaluate is None or stop is None or not bool(agree(bool(stop))):
        return False
    stats.interrupted = stop.signal_name or "a stop request"
    return True
