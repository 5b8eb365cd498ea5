"""hoodie.memory: freed C-heap pages go back to the operating system where the C library can; compaction
tasks make Arrow's pool one that hands freed pages back soon."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import textwrap

import pytest

from hoodie.memory import release_freed_heap

GLIBC = platform.libc_ver()[0] == "glibc"

# Run in a fresh interpreter: in the test process the heap's state (free chunks, arenas of other threads,
# an mmap threshold raised by earlier tests) decides where the blocks land, not the scenario below.
_SCENARIO = textwrap.dedent(
    """
    import numpy as np
    from hoodie.memory import release_freed_heap

    def rss_kib():
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])

    # Blocks below glibc's mmap threshold come from the heap and stay resident once freed; 2 MiB blocks
    # after a freed 16 MiB one raised the threshold (glibc's dynamic threshold), as the log scan's do.
    big = np.ones(16 << 20, dtype=np.uint8)
    del big
    blocks = [np.ones(2 << 20, dtype=np.uint8) for _ in range(64)]  # 128 MiB
    pin = np.ones(1 << 20, dtype=np.uint8)  # above them on the heap: glibc cannot just lower the top
    del blocks
    before = rss_kib()
    assert release_freed_heap()
    after = rss_kib()
    print(before, after)
    """
)


def test_release_freed_heap_works_where_glibc_is() -> None:
    assert release_freed_heap() is GLIBC


@pytest.mark.skipif(not GLIBC, reason="malloc_trim is glibc's; elsewhere release_freed_heap does nothing")
def test_freed_heap_blocks_leave_the_resident_set() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _SCENARIO], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    before, after = (int(v) for v in out.split())
    assert before - after > 64 << 10, (before, after)  # most of the 128 MiB is handed back


_POOL_SCENARIO = textwrap.dedent(
    """
    import os
    import pyarrow as pa
    from hoodie.memory import return_freed_arrow_memory

    before = pa.default_memory_pool().backend_name
    changed = return_freed_arrow_memory()
    pool = pa.default_memory_pool()
    print(before, changed, pool.backend_name, return_freed_arrow_memory())
    """
)


def _pool_scenario(env: dict[str, str]) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", _POOL_SCENARIO],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    ).stdout
    return out.split()


def test_compaction_tasks_make_arrows_pool_jemallocs() -> None:
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    _, changed, after, again = _pool_scenario(env)
    assert (changed, after, again) == ("True", "jemalloc", "True")  # once per process, then cached


def test_an_operators_pool_choice_stands() -> None:
    env = {**os.environ, "ARROW_DEFAULT_MEMORY_POOL": "system"}
    before, changed, after, _ = _pool_scenario(env)
    assert (before, changed, after) == ("system", "False", "system")
