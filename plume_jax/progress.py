"""Progress reporting for long commands (layer 5: ``train``, ``sweep``,
``evaluate``, ``demo``, ``bench``, ``data download``).

:class:`ProgressBar` shows one task's progress three ways, chosen once when
it is built:

- on a terminal (the stream is a TTY): a ``rich`` progress bar with the
  count, elapsed time and ETA, and an optional free-text message;
- otherwise (a log file, a pipe, CI): plain lines
  ``[label] 1,200/10,000 steps (12.0%) | 0:00:03 elapsed | ETA 0:00:22 | msg``
  printed at most every ``min_interval_s`` seconds, and always for the
  last update;
- ``quiet=True``: nothing at all.

It may be fed from a ``jax.debug.callback`` (any thread): updates only
record numbers and print; they never return anything to the caller.

Progress goes to stderr by default, as every command's progress and status
lines do: stdout carries only results (summaries, tables, JSON), so that
``plume-jax ... > results.txt`` or a pipe gets the results alone.
"""

from __future__ import annotations

import datetime as dt
import sys
import threading
import time
from typing import Any, TextIO


def _clock(seconds: float) -> str:
    return str(dt.timedelta(seconds=int(max(seconds, 0.0))))


class ProgressBar:
    """Progress of one task towards ``total`` units.

    Args:
        total: the amount of work (> 0), e.g. env steps or runs.
        label: shown before the bar or line (``"train"``).
        unit: what is counted (``"steps"``).
        quiet: show nothing.
        stream: where to write (default ``sys.stderr``, looked up when the
            bar is built).
        min_interval_s: plain mode: the least time between two lines.
        force_terminal: override the TTY detection (tests, notebooks).
        elapsed_from: the ``time.perf_counter()`` the elapsed time counts
            from, which :meth:`restart_clock` then keeps (it restarts the
            ETA's rate only): a task shown as several bars in turn, e.g.
            ``tune``'s batches, from its start. None (the default): from
            when the bar is built, and anew at each :meth:`restart_clock`.

    Use as a context manager, or call :meth:`close` when done::

        with ProgressBar(1000, "evaluate", unit="episodes") as bar:
            for i in range(10):
                ...
                bar.update(100 * (i + 1), message="scenario 3/10")
    """

    def __init__(self, total: float, label: str, *, unit: str = "steps", quiet: bool = False,
                 stream: TextIO | None = None, min_interval_s: float = 5.0,
                 force_terminal: bool | None = None, elapsed_from: float | None = None) -> None:
        self.total = float(total) if total and total > 0 else 1.0
        self.label = label
        self.unit = unit
        self.quiet = bool(quiet)
        self.stream = stream if stream is not None else sys.stderr
        self.min_interval_s = float(min_interval_s)
        self.completed = 0.0
        self.message = ""
        self._lock = threading.Lock()
        self._t0 = time.perf_counter()
        self._elapsed_from = elapsed_from
        self._last_line = -float("inf")
        self._closed = False
        is_tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.mode = "quiet" if self.quiet else (
            "terminal" if (is_tty if force_terminal is None else force_terminal) else "lines")
        self._rich: Any = None
        self._task: Any = None
        if self.mode == "terminal":
            self._start_rich(force_terminal)

    # ------------------------------------------------------------------ rich
    def _start_rich(self, force_terminal: bool | None) -> None:
        from rich.console import Console
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, ProgressColumn,
                                   TextColumn, TimeElapsedColumn, TimeRemainingColumn)
        from rich.text import Text

        bar = self

        class Elapsed(ProgressColumn):
            """The time since ``elapsed_from``."""

            def render(self, task: Any) -> Text:
                return Text(_clock(bar.elapsed()), style="progress.elapsed")

        console = Console(file=self.stream, force_terminal=force_terminal)
        self._rich = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn(self.unit),
            TimeElapsedColumn() if self._elapsed_from is None else Elapsed(),
            TextColumn("ETA"),
            TimeRemainingColumn(), TextColumn("{task.fields[message]}"),
            console=console, transient=False)
        self._rich.start()
        self._task = self._rich.add_task(self.label, total=self.total, message="")

    # ------------------------------------------------------------------- API
    def __enter__(self) -> "ProgressBar":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def restart_clock(self, completed: float | None = None) -> None:
        """Measure the ETA (and, without ``elapsed_from``, the elapsed
        time) from now (e.g. after a compile); ``completed``: also set the
        amount done (e.g. a resumed run's), without printing a line."""
        with self._lock:
            if completed is not None:
                self.completed = float(min(max(completed, 0.0), self.total))
            self._t0 = time.perf_counter()
            self._t0_completed = self.completed
            if self._rich is not None:
                self._rich.reset(self._task, total=self.total, completed=self.completed,
                                 message=self.message)

    def update(self, completed: float, message: str = "") -> None:
        """Set the amount done so far (absolute) and an optional message."""
        with self._lock:
            if self._closed:
                return
            self.completed = float(min(max(completed, 0.0), self.total))
            self.message = message
            if self.mode == "terminal":
                self._rich.update(self._task, completed=self.completed, message=message)
            elif self.mode == "lines":
                now = time.perf_counter()
                last = self.completed >= self.total
                if last or now - self._last_line >= self.min_interval_s:
                    self._last_line = now
                    print(self.line(now), file=self.stream, flush=True)

    def advance(self, amount: float = 1.0, message: str = "") -> None:
        """Add ``amount`` to the amount done."""
        self.update(self.completed + amount, message)

    def eta_seconds(self, now: float | None = None) -> float | None:
        """Seconds left at the mean rate since the clock started, or None."""
        now = time.perf_counter() if now is None else now
        start = getattr(self, "_t0_completed", 0.0)
        done = self.completed - start
        elapsed = now - self._t0
        if done <= 0 or elapsed <= 0:
            return None
        return (self.total - self.completed) * elapsed / done

    def elapsed(self, now: float | None = None) -> float:
        """Seconds since ``elapsed_from``, or since the clock started."""
        now = time.perf_counter() if now is None else now
        return now - (self._t0 if self._elapsed_from is None else self._elapsed_from)

    def line(self, now: float | None = None) -> str:
        """The plain-mode line for the current state."""
        now = time.perf_counter() if now is None else now
        eta = self.eta_seconds(now)
        text = (f"[{self.label}] {self.completed:,.0f}/{self.total:,.0f} {self.unit} "
                f"({100.0 * self.completed / self.total:.1f}%) | {_clock(self.elapsed(now))} elapsed"
                f" | ETA {'?' if eta is None else _clock(eta)}")
        return text + (f" | {self.message}" if self.message else "")

    def close(self) -> None:
        """Stop the bar (idempotent); in terminal mode leave the last frame."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._rich is not None:
                self._rich.stop()
