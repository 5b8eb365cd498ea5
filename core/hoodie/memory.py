"""Handing memory the process has freed back to the operating system.

glibc's ``malloc`` keeps freed blocks in its heap for reuse, and after a large block is freed it raises its
mmap threshold (up to 32 MiB), so that the next blocks of that size come from the heap too. A merge that
reads a slice's whole log first (the raw files, then the decoded columns) and frees the raw bytes leaves
that much resident but unused while the base file is read: a compaction's peak RSS grew by about a third of
the slice's Arrow size from it. :func:`release_freed_heap` returns such free pages (``malloc_trim(0)``, tens
of microseconds); elsewhere (musl, macOS) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable

__all__ = ["release_freed_heap"]


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        trim = libc.malloc_trim  # glibc only
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def release_freed_heap() -> bool:
    """Return the C heap's free pages to the operating system; True when the C library could (glibc)."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
