"""hoodie.memory: freed C-heap pages go back to the operating system where the C library can."""

from __future__ import annotations

import platform

import numpy as np

from hoodie.memory import release_freed_heap


def _rss_kib() -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def test_release_freed_heap_works_where_glibc_is() -> None:
    assert release_freed_heap() is (platform.libc_ver()[0] == "glibc")


def test_freed_heap_blocks_leave_the_resident_set() -> None:
    if platform.libc_ver()[0] != "glibc" or _rss_kib() is None:
        return
    # Blocks below glibc's mmap threshold come from the heap and stay resident once freed; 2 MiB blocks
    # after a freed 16 MiB one raised the threshold (glibc's dynamic threshold), as the log scan's do.
    big = np.ones(16 << 20, dtype=np.uint8)
    del big
    blocks = [np.ones(2 << 20, dtype=np.uint8) for _ in range(64)]  # 128 MiB
    pin = np.ones(1 << 20, dtype=np.uint8)  # above them on the heap: glibc cannot just lower the top
    del blocks
    before = _rss_kib()
    assert release_freed_heap()
    after = _rss_kib()
    assert before is not None
    assert after is not None
    assert before - after > 64 << 10, (before, after)  # most of the 128 MiB is handed back
    del pin
