"""Stop signals are acted on off the signal handler (:mod:`hoodied.signals`): a SIGTERM that lands while the
main thread holds the lock of the event it waits on still stops the process (found by the chaos campaign: a
replica whose handler set that event waited for itself forever after "SIGTERM received: draining").

Each case runs in a child process of its own, with a deadline: signals and the wake-up pipe are per process,
and the old handler's failure is a hang."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(script: str, timeout: float = 30.0) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_sigterm_while_the_main_thread_holds_the_events_lock_still_sets_it() -> None:
    out = _run(
        """
        import os, signal, threading, time
        from hoodied.signals import StopSignals

        stop = threading.Event()
        signals = StopSignals(lambda signum, count: stop.set())
        assert signals.install()
        # Between two timed waits, Event.wait holds the event's (not reentrant) lock: the Python-level
        # handler runs at one of the bytecodes below, inside it.
        with stop._cond:
            os.kill(os.getpid(), signal.SIGTERM)
            deadline = time.monotonic() + 0.5
            while time.monotonic() < deadline:
                pass
        print("stopped" if stop.wait(10) else "not stopped")
        """
    )
    assert out.strip() == "stopped"


def test_signals_are_counted_in_order_and_restored() -> None:
    out = _run(
        """
        import os, signal, threading
        from hoodied.signals import StopSignals

        seen = []
        third = threading.Event()

        def on_signal(signum, count):
            seen.append((signal.Signals(signum).name, count, threading.current_thread().name))
            if count == 3:
                third.set()

        signals = StopSignals(on_signal)
        assert signals.install()
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGTERM):
            os.kill(os.getpid(), s)
        assert third.wait(10), seen
        signals.restore()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
        assert signal.set_wakeup_fd(-1) == -1
        print(seen)
        """
    )
    assert out.strip() == str(
        [("SIGTERM", 1, "stop-signals"), ("SIGINT", 2, "stop-signals"), ("SIGTERM", 3, "stop-signals")]
    )


def test_off_the_main_thread_nothing_is_installed() -> None:
    out = _run(
        """
        import signal, threading
        from hoodied.signals import StopSignals

        result = []
        t = threading.Thread(target=lambda: result.append(StopSignals(lambda s, c: None).install()))
        t.start()
        t.join()
        print(result, signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)
        """
    )
    assert out.strip() == "[False] True"


def test_a_sighup_asks_for_a_reload_and_is_no_stop() -> None:
    """SIGHUP calls ``on_reload`` (the daemon reads its configuration again: hoodied.config_reload) on the
    signal thread, and does not count towards the stops (a SIGTERM after two SIGHUPs is the first stop)."""
    out = _run(
        """
        import os, signal, threading
        from hoodied.signals import StopSignals

        reloads, stops = [], []
        stopped = threading.Event()

        def on_signal(signum, count):
            stops.append(count)
            stopped.set()

        before = signal.getsignal(signal.SIGHUP)  # SIG_IGN under nohup
        signals = StopSignals(on_signal, on_reload=lambda: reloads.append(threading.current_thread().name))
        assert signals.install()
        os.kill(os.getpid(), signal.SIGHUP)
        os.kill(os.getpid(), signal.SIGHUP)
        os.kill(os.getpid(), signal.SIGTERM)
        assert stopped.wait(10)
        signals.restore()
        assert signal.getsignal(signal.SIGHUP) == before
        print(reloads, stops)
        """
    )
    assert out.strip() == "['stop-signals', 'stop-signals'] [1]"
