"""Minimal PNG writer (no imaging dependency): 8-bit RGB, zlib-compressed."""

from __future__ import annotations

import os
import struct
import zlib

import numpy as np


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def encode_png(image: np.ndarray) -> bytes:
    """PNG bytes of a uint8[H, W, 3] RGB image."""
    image = np.asarray(image)
    if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise ValueError(f"image of shape {image.shape} and dtype {image.dtype} is invalid: "
                         "expected uint8[H, W, 3]")
    h, w, _ = image.shape
    raw = b"".join(b"\x00" + image[row].tobytes() for row in range(h))  # filter type 0
    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(raw, 6)) \
        + _chunk(b"IEND", b"")


def write_png(path: str | os.PathLike, image: np.ndarray) -> None:
    """Write a uint8[H, W, 3] RGB image to ``path``."""
    with open(path, "wb") as f:
        f.write(encode_png(image))
