"""Handing memory the process has freed back to the operating system.

glibc's ``malloc`` keeps freed blocks in its heap for reuse, and after a large block is freed it raises its
mmap threshold (up to 32 MiB), so that the next blocks of that size come from the heap too. A merge that
reads a slice's whole log first (the raw files, then the decoded columns) and frees the raw bytes leaves
that much resident but unused while the base file is read: a compaction's peak RSS grew by about a third of
the slice's Arrow size from it. :func:`release_freed_heap` returns such free pages (``malloc_trim(0)``, tens
of microseconds); elsewhere (musl, macOS) it does nothing.

Arrow's buffers come from its own allocator (mimalloc in pyarrow's wheels), which keeps freed pages for
reuse a while, per thread. A rewrite that decodes, merges and encodes on several threads frees hundreds of
megabytes a second, and the pages kept added about a third of the slice's Arrow size to a compaction's
peak RSS. :func:`return_freed_arrow_memory` makes Arrow's default pool jemalloc's with a decay of
:data:`ARROW_DECAY_MS`: a freed page goes back to the system that soon. (A decay of 0 saved 30 MB more on
the compaction benchmark but cost a fifth more time, in page faults; 20 ms cost nothing measurable.)
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
from collections.abc import Callable

import pyarrow as pa

__all__ = ["ARROW_DECAY_MS", "release_freed_heap", "return_freed_arrow_memory"]

#: Milliseconds a page Arrow freed stays with its allocator (jemalloc's decay) once
#: :func:`return_freed_arrow_memory` ran.
ARROW_DECAY_MS = 20


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


@functools.cache
def return_freed_arrow_memory() -> bool:
    """Make Arrow's default memory pool return freed pages to the operating system within
    :data:`ARROW_DECAY_MS` (jemalloc's, with that decay), for the rest of the process: compaction tasks call
    it first. True when it did; False when this pyarrow has no jemalloc, or ``ARROW_DEFAULT_MEMORY_POOL``
    chose a pool (the operator's choice stands)."""
    if os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        return False
    try:
        pool = pa.jemalloc_memory_pool()
        pa.jemalloc_set_decay_ms(ARROW_DECAY_MS)
    except NotImplementedError:
        return False
    pa.set_memory_pool(pool)
    return True
