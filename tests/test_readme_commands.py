"""The README's two commands, run as a new user would: in a fresh clone, with only the system's ``python3``
(Debian's, "externally managed") on ``PATH``, the real ``make`` and a throwaway ``HOME``.

``make demo`` must install everything (a venv, hoodied, Java when missing), run the demo to a good end and
say how to run ``hoodied`` afterwards; ``make test`` must install the test tools into the same venv and run
lint, types and (here, to keep the suite short) a part of the suite. Each prints its wall time. About four
minutes of installing, so it runs with ``-m campaign``; CI's own run is a fresh clone's ``make test``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.shared import REPO_ROOT, shared_dir

pytestmark = pytest.mark.slow

SYSTEM_PYTHON = Path("/usr/bin/python3")
#: What the clean environment keeps: the machine's package-index settings (pip, npm, proxies and the
#: certificate authorities they trust), nothing of the user's.
_KEPT = (
    "PIP_",
    "NPM_CONFIG_",
    "npm_config_",
    "NODE_EXTRA_CA_CERTS",
    "SSL_CERT_",
    "REQUESTS_CA_BUNDLE",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
)


def _fresh_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k.startswith(_KEPT)}
    env.update(PATH="/usr/bin:/bin", HOME=str(home), LANG="C.UTF-8")
    return env


def _run(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=1800)
    return done, time.monotonic() - started


def test_make_runs_the_python_it_was_given() -> None:
    """``make demo PYTHON=...`` installs into that Python and runs that Python (GNU Make 4.3 did not pass
    ``PYTHON`` to ``$(shell)``, so the demo ran another interpreter: "No module named 'hoodied'")."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    python = os.path.realpath(sys.executable)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHON", "VENV", "MAKEFLAGS")}
    dry = subprocess.run(
        ["make", "-n", "demo", f"PYTHON={python}"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert dry.returncode == 0, dry.stderr
    assert f"{python} -m hoodied.cli demo" in dry.stdout, dry.stdout


@pytest.mark.campaign
def test_make_demo_and_make_test_in_a_fresh_clone(tmp_path: Path) -> None:
    if not SYSTEM_PYTHON.exists():
        pytest.skip(f"no system python3 at {SYSTEM_PYTHON}")
    for tool in ("git", "make"):
        if shutil.which(tool, path="/usr/bin:/bin") is None:
            pytest.skip(f"{tool} is not installed in /usr/bin")
    clone = tmp_path / "hoodied"
    subprocess.run(["git", "clone", "--quiet", str(REPO_ROOT), str(clone)], check=True, timeout=300)
    if shared_dir().is_dir():
        (tmp_path / "shared").symlink_to(shared_dir())
    home = tmp_path / "home"
    home.mkdir()
    env = _fresh_env(home)

    demo, demo_s = _run(["make", "demo", "DEMO_ARGS=--duration 15 --port 0"], clone, env)
    print(f"make demo: {demo_s:.0f} s")
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    assert "they agree" in demo.stdout
    venv_hoodied = clone / ".venv" / "bin" / "hoodied"
    externally_managed = "externally managed" in demo.stdout
    if externally_managed:
        assert f"run it as {venv_hoodied}" in demo.stdout
        version = subprocess.run([str(venv_hoodied), "--version"], capture_output=True, text=True, env=env)
        assert version.stdout.startswith("hoodied "), version

    tests = "PYTEST_ARGS=tests/core/test_scheduling.py tests/services/test_health.py"
    test, test_s = _run(["make", "test", tests], clone, env)
    print(f"make test (lint, types, 2 test modules): {test_s:.0f} s")
    assert test.returncode == 0, test.stdout[-3000:] + test.stderr[-3000:]
    assert "ruff check" in test.stdout
    assert " passed" in test.stdout
