"""The code executors run: the shipped archive holds exactly the files the stamp covers, imports with the
same stamp in a Python that has no hoodied installed, and another build is refused before any work."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from hoodied.executor_code import (
    CodeMismatch,
    CodeStamp,
    check_code,
    code_archive,
    code_stamp,
    should_ship,
)


def test_the_archive_is_the_code_the_stamp_covers(tmp_path: Path) -> None:
    path = code_archive(str(tmp_path))
    assert code_archive(str(tmp_path)) == path  # same code, same archive
    names = zipfile.ZipFile(path).namelist()
    assert "hoodie/table.py" in names
    assert "hoodied/jobs.py" in names
    assert any(n.startswith("hoodie/avro/schemas/") and n.endswith(".avsc") for n in names)
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    # Imported from the archive alone (-S: no site-packages, so no installed hoodied), the stamp is the same.
    probe = (
        f"import sys; sys.path.insert(0, {path!r}); "
        "from hoodied.executor_code import code_stamp; print(code_stamp().digest)"
    )
    out = subprocess.run(
        [sys.executable, "-S", "-c", probe], capture_output=True, text=True, cwd=tmp_path, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == code_stamp().digest


def test_other_code_is_refused_with_both_builds_named() -> None:
    check_code(code_stamp())
    check_code(CodeStamp("unknown", code_stamp().digest))  # shipped code has no installed version
    with pytest.raises(CodeMismatch, match=r"the driver runs hoodied 9\.9\.9 \(0000"):
        check_code(CodeStamp("9.9.9", "0" * 64))


def test_code_ships_to_clusters_by_default() -> None:
    assert should_ship("auto", "spark://127.0.0.1:7077")
    assert should_ship("auto", "k8s://https://kubernetes.default.svc")
    assert not should_ship("auto", "local[2]")
    assert should_ship("always", "local[*]")
    assert not should_ship("never", "spark://h:7077")
    with pytest.raises(ValueError, match="ship_code"):
        should_ship("sometimes", "local")
