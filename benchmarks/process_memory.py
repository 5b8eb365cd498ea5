"""A benchmark process's peak memory: the peak RSS (Linux ``VmHWM``) since a mark, in KiB.

Not ``ru_maxrss``: Linux carries it over ``exec`` from the parent (``fork``/``vfork`` then ``exec``), so a
child's ``ru_maxrss`` starts at the size of the benchmark's parent process. ``ru_maxrss`` is only the fallback
where ``/proc`` has no ``VmHWM``.
"""

from __future__ import annotations

import resource


def status_kib(field: str) -> int | None:
    """A ``kB`` field of ``/proc/self/status`` (``VmHWM``, ``VmRSS``), or ``None`` without one."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def memory_mark() -> int:
    """The RSS to measure from, in KiB: the current RSS with the peak reset to it when Linux allows (else the
    peak so far)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset the peak RSS (VmHWM) to the current RSS
    except OSError:
        pass
    return memory_peak()


def memory_peak() -> int:
    """The peak RSS since :func:`memory_mark`, in KiB."""
    peak = status_kib("VmHWM")
    return peak if peak is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


__all__ = ["memory_mark", "memory_peak", "status_kib"]
