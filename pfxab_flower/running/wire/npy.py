"""The ``.npy`` bytes arrays travel as (Flower's ``Array`` and legacy ``Parameters`` both use them).

The header ``np.save`` writes for a plain C-ordered array is matched here, because numpy's own
parser cost a quarter of a client's time per message at M = 1000 (docs/performance.md); anything
else is read by numpy itself.
"""

from __future__ import annotations

import io
import math
import re
import struct

import numpy as np

#: The ``.npy`` header ``np.save`` writes for a C-ordered array of a plain dtype (version 1.0).
NPY_HEADER = re.compile(rb"\{'descr': '([<>|=]?[biuf]\d{1,2})', 'fortran_order': False, 'shape': \(([\d, ]*)\), \} *\n")
NPY_MAGIC = b"\x93NUMPY\x01\x00"


def npy_layout(data: bytes) -> tuple[np.dtype, tuple[int, ...], int] | None:
    """``(dtype, shape, data offset)`` of ``.npy`` bytes that ``np.save`` wrote for a C-ordered array of
    booleans or numbers, whose data is exactly as long as the shape says; ``None`` for anything else."""
    if data[:8] != NPY_MAGIC or len(data) < 10:
        return None
    (length,) = struct.unpack_from("<H", data, 8)
    header = NPY_HEADER.fullmatch(data[10:10 + length])
    if header is None:
        return None
    shape = tuple(int(n) for n in header.group(2).split(b",") if n.strip())
    dtype = np.dtype(header.group(1).decode())
    if len(data) - 10 - length != math.prod(shape) * dtype.itemsize:
        return None
    return dtype, shape, 10 + length


def to_npy(array: np.ndarray) -> bytes:
    """``array`` as the ``.npy`` bytes ``np.save`` writes (what Flower sends for a numpy array)."""
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


def from_npy(data: bytes) -> np.ndarray:
    """The array of ``.npy`` bytes (a copy); numpy's own reader for anything :func:`npy_layout` does not match.

    Raises ``ValueError`` (or numpy's own error) for bytes that are not an array without objects.
    """
    layout = npy_layout(data)
    if layout is not None:
        dtype, shape, offset = layout
        return np.frombuffer(data, dtype=dtype, offset=offset).reshape(shape).copy()
    declared = _declared_bytes(data)
    if declared is not None and declared > len(data):  # numpy would allocate what the header claims first
        raise ValueError(f"the .npy header declares {declared} bytes of data, but only {len(data)} bytes came")
    array: np.ndarray = np.load(io.BytesIO(data), allow_pickle=False)
    return array


def _declared_bytes(data: bytes) -> int | None:
    """The data size a ``.npy`` header declares (``None`` if it cannot be read: numpy's reader says why)."""
    buffer = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(buffer)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, dtype = read(buffer)
    except Exception:  # not an array header: np.load raises the reason
        return None
    return math.prod(shape) * dtype.itemsize


def npy_elements(data: bytes) -> int:
    """Elements of one ``.npy`` array, read from its header only (0 for bytes that are not one)."""
    layout = npy_layout(data)
    if layout is not None:
        return math.prod(layout[1])
    buffer = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(buffer)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, _ = read(buffer)
    except Exception:  # an unreadable tensor still costs its bytes
        return 0
    return int(np.prod(shape, dtype=np.int64))
