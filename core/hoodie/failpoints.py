"""Named crash points for tests that kill a process at an exact step (as a power cut or SIGKILL would).

``HOODIE_FAILPOINTS`` lists the active points, comma-separated. When execution reaches an active point the
process named by ``HOODIE_FAILPOINT_PID`` (default: this one) is killed with SIGKILL, at once and without
clean-up. Points in Spark tasks name the driver's pid so that the whole job dies, as when a pod is lost.
A point written ``name=sleep:SECONDS`` pauses there instead (a slow step, for tests that act mid-job), and
``name=until:PATH`` pauses until the file ``PATH`` exists (a test releases the step when it is ready).
With the variable unset (always, in production), :func:`failpoint` costs one dictionary look-up.
"""

from __future__ import annotations

import logging
import os
import signal
import time

ENV = "HOODIE_FAILPOINTS"
PID_ENV = "HOODIE_FAILPOINT_PID"

logger = logging.getLogger(__name__)


def active() -> dict[str, str]:
    """The active points and their actions (``kill``, ``sleep:SECONDS`` or ``until:PATH``)."""
    raw = os.environ.get(ENV, "")
    out: dict[str, str] = {}
    for entry in raw.split(","):
        name, _, action = entry.strip().partition("=")
        if name:
            out[name] = action.strip() or "kill"
    return out


def failpoint(name: str) -> None:
    """Kill the process here (or pause) when ``name`` is active."""
    if ENV not in os.environ:
        return
    action = active().get(name)
    if action is None:
        return
    if action.startswith("sleep:"):
        seconds = float(action.removeprefix("sleep:"))
        logger.warning("failpoint %s: sleeping %.1f s", name, seconds)
        time.sleep(seconds)
        return
    if action.startswith("until:"):
        path = action.removeprefix("until:")
        logger.warning("failpoint %s: waiting for %s", name, path)
        while not os.path.exists(path):
            time.sleep(0.05)
        return
    target = int(os.environ.get(PID_ENV) or os.getpid())
    logger.warning("failpoint %s: killing process %d", name, target)
    os.kill(target, signal.SIGKILL)
    if target != os.getpid():  # the driver dies; this task must not go on to finish its work
        os.kill(os.getpid(), signal.SIGKILL)


def arm_for_children() -> None:
    """Make failpoints reached in child processes (Spark workers) kill this process."""
    if ENV in os.environ and PID_ENV not in os.environ:
        os.environ[PID_ENV] = str(os.getpid())


__all__ = ["ENV", "PID_ENV", "active", "arm_for_children", "failpoint"]
