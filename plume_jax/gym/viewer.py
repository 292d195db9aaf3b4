"""``render_mode="human"``: show frames in a window when a display exists.

The window is a matplotlib figure, opened on the first frame. When there is
no display (no ``DISPLAY``/``WAYLAND_DISPLAY`` on Linux and other X11
platforms), when matplotlib is not installed, or when matplotlib can only use
a non-interactive backend, showing a frame does nothing: human rendering is
best-effort and never raises, and it never imports matplotlib where it could
not show anything.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np


def display_available() -> bool:
    """Whether a window could be shown: always on macOS and Windows; on other
    platforms only when ``DISPLAY`` or ``WAYLAND_DISPLAY`` is set."""
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def _interactive_backend(matplotlib: Any) -> bool:
    backend = str(matplotlib.get_backend()).lower()
    try:
        from matplotlib.backends import BackendFilter, backend_registry

        non_interactive = {b.lower() for b in backend_registry.list_builtin(
            BackendFilter.NON_INTERACTIVE)}
    except ImportError:  # older matplotlib
        non_interactive = {"agg", "cairo", "pdf", "pgf", "ps", "svg", "template"}
    return backend not in non_interactive


class HumanViewer:
    """A lazily opened window that shows RGB frames at ``fps``.

    ``show(frame)`` returns None whether or not a window could be shown.
    ``usable`` is False once it has found that no window can be shown.
    """

    def __init__(self, fps: float, title: str = "plume_jax") -> None:
        self.fps = float(fps)
        self.title = title
        self.usable = True
        self._plt: Any = None
        self._figure: Any = None
        self._image: Any = None

    def _open(self, frame: np.ndarray) -> bool:
        if not display_available():
            self.usable = False
            return False
        try:
            import matplotlib
        except ImportError:
            self.usable = False
            return False
        if not _interactive_backend(matplotlib):
            self.usable = False
            return False
        import matplotlib.pyplot as plt

        self._plt = plt
        plt.ion()
        self._figure, axes = plt.subplots(num=self.title)
        axes.set_axis_off()
        self._image = axes.imshow(frame, interpolation="nearest")
        self._figure.tight_layout()
        return True

    def show(self, frame: np.ndarray) -> None:
        """Draw ``frame`` (uint8[H, W, 3]) and let the window process events."""
        if not self.usable:
            return None
        frame = np.asarray(frame)
        if self._figure is None:
            if not self._open(frame):
                return None
        elif not self._plt.fignum_exists(self._figure.number):
            return None  # the user closed the window
        else:
            self._image.set_data(frame)
        self._figure.canvas.draw_idle()
        self._plt.pause(1.0 / self.fps)
        return None

    def close(self) -> None:
        """Close the window, if one was opened (idempotent)."""
        if self._figure is not None and self._plt is not None:
            self._plt.close(self._figure)
        self._figure = None
        self._image = None
