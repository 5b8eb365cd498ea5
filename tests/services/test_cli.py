from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from hoodie import Table
from hoodie.testing.generate import GenerateSpec, generate_table
from hoodied.cli import main
from support.compare import assert_same_rows

MOR_TABLE = "apache-hudi/hudi-v8-table-mor:hudi-v8-table-mor"


def test_missing_table_is_one_line_and_status_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["read", str(tmp_path / "nope"), "--out", str(tmp_path / "o.parquet")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("hoodied: error: TableNotFound:")
    assert not (tmp_path / "o.parquet").exists()


def test_bad_instant_time_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    props = tmp_path / "t" / ".hoodie" / "hoodie.properties"
    props.parent.mkdir(parents=True)
    props.write_text("hoodie.table.name=t\nhoodie.table.type=COPY_ON_WRITE\nhoodie.table.version=6\n")
    assert (
        main(["read", str(tmp_path / "t"), "--out", str(tmp_path / "o.parquet"), "--as-of", "yesterday"]) == 2
    )
    assert "yesterday" in capsys.readouterr().err


def test_runs_as_a_module_with_the_same_error_contract(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "hoodied.cli", "timeline", str(tmp_path)], capture_output=True, text=True
    )
    assert done.returncode == 2
    assert done.stderr.startswith("hoodied: error:")


def test_read_writes_the_query_result(
    fixture_root: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = fixture_root(MOR_TABLE)
    table = Table.open(str(root))
    # The earliest instant a time travel may ask for (older ones are refused, see
    # test_read_as_of_a_cleaned_instant_is_refused).
    first = table.earliest_time_travel() or table.timeline.completed_writes()[0].time
    keys = ["_hoodie_partition_path", "_hoodie_record_key"]
    for extra, expected in [
        ([], table.read()),
        (["--read-optimized"], table.read(read_optimized=True)),
        (["--as-of", first], table.read(as_of=first)),
    ]:
        out = tmp_path / "out.parquet"
        assert main(["read", str(root), "--out", str(out), *extra]) == 0
        assert f"wrote {expected.num_rows} rows" in capsys.readouterr().out
        assert_same_rows(pq.read_table(out), expected, keys, context=f"hoodied read {extra}")


def test_timeline_and_fsview_print_every_instant_and_slice(
    fixture_root: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    root = fixture_root(MOR_TABLE)
    table = Table.open(str(root))
    assert main(["timeline", str(root)]) == 0
    lines = capsys.readouterr().out.splitlines()[1:]
    assert [line.split()[:3] for line in lines] == [[i.time, i.action, i.state.name] for i in table.timeline]
    assert main(["fsview", str(root)]) == 0
    out = capsys.readouterr().out
    for s in table.file_slices():
        assert f"file group {s.group}" in out
        if s.base_file:
            assert s.base_file.file_name in out
        for lf in s.log_files:
            assert lf.file_name in out


def test_read_as_of_a_cleaned_instant_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: ``wrote 0 rows`` and status 0 for an instant whose files the clean had removed."""
    root = tmp_path / "t"
    assert main(["generate", str(root), "--table-type", "cow", "--rows", "60", "--commits", "4"]) == 0
    first = Table.open(str(root)).timeline.completed_writes()[0].time
    conf = ["--conf", "hoodie.clean.commits.retained=1"]
    assert main(["clean", str(root), "--mode", "schedule-and-execute", *conf]) == 0
    capsys.readouterr()
    out = tmp_path / "o.parquet"
    assert main(["read", str(root), "--out", str(out), "--as-of", first]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hoodied: error: TimeTravelRefused:")
    assert "the earliest instant that can be read is" in err
    assert not out.exists()


def test_a_misspelt_setting_is_an_error_naming_the_key_meant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "t"
    assert main(["generate", str(root), "--table-type", "cow", "--rows", "20", "--commits", "1"]) == 0
    conf = ["--conf", "hoodie.clean.comits.retained=1"]
    assert main(["clean", str(root), "--mode", "schedule", *conf]) == 2
    assert "did you mean hoodie.clean.commits.retained?" in capsys.readouterr().err
    assert (
        main(["clean", str(root), "--mode", "schedule", "--conf", "hoodie.datasource.write.operation=x"]) == 0
    )
    assert (
        "hoodie.datasource.write.operation is a Hudi setting hoodied does not read" in capsys.readouterr().err
    )


def test_generate_writes_with_the_operation_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "t"
    argv = ["generate", str(root), "--rows", "50", "--commits", "2", "--operation", "bulk_insert"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "deltacommit BULK_INSERT" in out
    assert "deltacommit DELETE" in out
    keys = Table.open(str(root)).read(columns=["_hoodie_record_key"]).column(0).to_pylist()
    assert len(keys) > len(set(keys)), "bulk_insert repeats the keys it updates"
    with pytest.raises(SystemExit):
        main(["generate", str(tmp_path / "u"), "--operation", "merge"])


def test_savepoint_restore_and_ttl_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The operator commands wired to the services: a savepoint is created and listed, a restore brings the
    table back to it (our snapshot equals time travel to it taken before), the savepoint is deleted; ttl
    schedules nothing on fresh data and says why."""
    root = tmp_path / "t"
    spec = GenerateSpec(table_type="COPY_ON_WRITE", table_version=8, rows=60, commits=3, partitions=2)
    generate_table(str(root), spec)
    table = Table.open(str(root))
    saved = table.timeline.completed_writes()[1].time
    at_savepoint = table.read(as_of=saved)
    assert main(["savepoint", "create", str(root), saved, "--user", "ops", "--comments", "before"]) == 0
    assert f"savepoint {saved} created" in capsys.readouterr().out
    assert main(["savepoint", "list", str(root)]) == 0
    listed = capsys.readouterr().out
    assert saved in listed
    assert "by ops" in listed
    assert main(["restore", str(root), saved]) == 0
    out = capsys.readouterr().out
    assert f"to savepoint {saved}" in out
    assert "1 instant(s) rolled back" in out
    restored = Table.open(str(root))
    assert [w.time for w in restored.timeline.completed_writes()][-1] == saved
    assert_same_rows(restored.read(), at_savepoint, ["_hoodie_record_key"])
    assert main(["savepoint", "delete", str(root), saved]) == 0
    assert f"savepoint {saved} deleted" in capsys.readouterr().out
    assert main(["savepoint", "list", str(root)]) == 0
    assert "no savepoint" in capsys.readouterr().out
    conf = ["--conf", "hoodie.partition.ttl.days.retain=30"]
    assert main(["ttl", str(root), "--mode", "schedule-and-execute", *conf]) == 0
    assert "no ttl scheduled" in capsys.readouterr().out


def test_output_read_only_in_part_ends_quietly(tmp_path: Path) -> None:
    """``hoodied fsview PATH | head -1``: the reader leaves before the output ends; that is not an error of
    the command (issue 35: it printed ``Broken pipe`` and exited 1)."""
    root = tmp_path / "t"
    generate_table(str(root), GenerateSpec(table_version=8, rows=200, commits=3, partitions=3))
    command = [sys.executable, "-m", "hoodied.cli", "fsview", str(root)]
    assert subprocess.run(command, capture_output=True, check=True).stdout.count(b"\n") > 1
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.close()  # the reader is gone before the first line: every write meets a closed pipe
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert err == b""


@pytest.mark.parametrize(
    ("command", "service"), [("compact", "compaction"), ("cluster", "clustering"), ("clean", "clean")]
)
def test_running_an_instant_that_does_not_exist_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, service: str
) -> None:
    """A mistyped ``--instant`` names nothing to run: status 2 and the reason on standard error (issue 35:
    it printed the reason and exited 0, as for an instant another runner completed meanwhile)."""
    root = tmp_path / "t"
    generate_table(str(root), GenerateSpec(table_version=8, rows=100, commits=2, partitions=2))
    code = main([command, str(root), "--mode", "execute", "--instant", "20990101000000000"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith(f"hoodied: error: {service} 20990101000000000 of ")
    assert "is not" in err
