"""A second executor in a process of its own: runs one pending instant as a daemon replica does
(:func:`hoodied.jobs.run_service_job`, its claim held elsewhere: no local claim file), so that tests can put
it beside a one-off command, another replica or a takeover, pause it (``HOODIE_FAILPOINTS``, SIGSTOP) and
see what each side does.

    python -m support.instant_runner PATH SERVICE INSTANT REPLICA [--conf key=value ...]

Prints ``RUNNING <pid>`` once started, then one line: ``DONE <summary>`` (exit 0), ``LOST <why>`` (lost the
race or the lease: exit 3), ``FOREIGN <why>`` (left to a live owner: exit 4) or ``FAILED <why>`` (exit 1).
"""

from __future__ import annotations

import argparse
import os
import sys

from hoodie.errors import LeaseLost, LostRace
from hoodie.lock import FileSystemLock
from hoodie.registry import service_named
from hoodie.storage import Storage
from hoodied.errors import ForeignInstant
from hoodied.jobs import run_service_job


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="instant_runner")
    parser.add_argument("path")
    parser.add_argument("service")
    parser.add_argument("instant")
    parser.add_argument("replica")
    parser.add_argument("--conf", action="append", default=[])
    args = parser.parse_args(argv)
    settings = dict(item.split("=", 1) for item in args.conf)
    storage = Storage.for_uri(args.path)
    print(f"RUNNING {os.getpid()}", flush=True)
    try:
        run = run_service_job(
            None,
            service_named(args.service),
            storage,
            FileSystemLock(storage),
            args.instant,
            settings=settings,
            replica=args.replica,
            foreign_after=0.0,
        )
    except (LostRace, LeaseLost) as e:
        print(f"LOST {type(e).__name__}: {e}", flush=True)
        return 3
    except ForeignInstant as e:
        print(f"FOREIGN {e}", flush=True)
        return 4
    except Exception as e:
        print(f"FAILED {type(e).__name__}: {e}", flush=True)
        return 1
    print(f"DONE {run.done.summary}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
