"""Hudi's write-commit callback, received (issue 34): the message as Hudi's HoodieWriteCommitHttpCallback
sends it, its key, and the table it names queued for the poller."""

from __future__ import annotations

import json
import threading
import time
from http import HTTPStatus
from pathlib import Path

import pytest

from hoodied.change_events import MAX_QUEUED, Announcement, ChangeEvents
from hoodied.commit_callback import HUDI_DEFAULT_KEY, CommitCallback, parse_message

#: One line, as Hudi's Jackson mapper writes it (WAVE3-FACTS 2.4): the Options come as beans, the action
#: never arrives; a delta write stat carries its log files.
HUDI_BODY = (
    b'{"commitTime":"20260227101500123","tableName":"trips","basePath":"s3://b/trips",'
    b'"hoodieWriteStat":[{"numInserts":10,"numUpdates":0,"numDeletes":0,"totalLogReadTimeMs":0,'
    b'"totalLogRecords":0,"totalLogFilesCompacted":0,"totalLogSizeCompacted":0,'
    b'"totalUpdatedRecordsCompacted":0,"totalLogBlocks":0,"totalCorruptLogBlock":0,"totalRollbackBlocks":0,'
    b'"fileId":"3f0e6a1c-0","path":"2026/02/27/3f0e6a1c-0_0-10-12_20260227101500123.parquet",'
    b'"cdcStats":null,"prevCommit":"null","numWrites":10,"numUpdateWrites":0,"totalWriteBytes":435112,'
    b'"totalWriteErrors":0,"tempPath":null,"partitionPath":"2026/02/27","fileSizeInBytes":435112,'
    b'"minEventTime":null,"maxEventTime":null,"prevBaseFile":null,"runtimeStats":null,'
    b'"logVersion":1,"logOffset":0,"baseFile":"","logFiles":[],'
    b'"columnStats":{"empty":true,"present":false}}],'
    b'"commitActionType":{"empty":false,"present":true},"extraMetadata":{"empty":true,"present":false}}'
)


def test_hudis_message_is_read_as_hudi_sends_it() -> None:
    message = parse_message(HUDI_BODY)
    assert message.commit_time == "20260227101500123"
    assert message.table_name == "trips"
    assert message.base_path == "s3://b/trips"
    assert message.partitions == ("2026/02/27",)
    # v6 writers' instant times have 14 digits; the stats may be missing or empty.
    assert parse_message(b'{"commitTime":"20260227101500","basePath":"/t"}').commit_time == "20260227101500"


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"not json", "not JSON"),
        (b"[1]", "JSON object"),
        (b'{"basePath":"s3://b/t"}', "commitTime"),
        (b'{"commitTime":"yesterday","basePath":"s3://b/t"}', "not an instant time"),
        (b'{"commitTime":"20260227101500123","basePath":""}', "basePath"),
        (b'{"commitTime":"20260227101500123","basePath":"s3://b/t\\nERROR forged"}', "one line"),
        (b"\xff\xfe", "not JSON"),
    ],
)
def test_anything_else_is_refused_saying_why(body: bytes, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_message(body)


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "callback.key"
    path.write_text("s3cret-key\n")
    return path


def test_a_callback_with_the_key_queues_its_table(key_file: Path, tmp_path: Path) -> None:
    events = ChangeEvents()
    callback = CommitCallback(events, str(key_file))
    answer = callback.receive({"hudi-callback-key": "s3cret-key"}, HUDI_BODY)
    assert answer.status == HTTPStatus.ACCEPTED
    local = tmp_path / "t"
    body = json.dumps({"commitTime": "20260227101500123", "basePath": f"file://{local}/"}).encode()
    assert callback.receive({"hudi-callback-key": "s3cret-key"}, body).status == HTTPStatus.ACCEPTED
    taken = events.take()
    assert set(taken) == {"s3://b/trips", str(local)}  # by identity: file://, a trailing / are one table
    assert taken["s3://b/trips"].instant == "20260227101500123"
    assert taken["s3://b/trips"].source == "commit_callback"
    assert events.take() == {}
    assert events.received["commit_callback"] == 2


@pytest.mark.parametrize(
    ("key_content", "headers", "status"),
    [
        (None, {"hudi-callback-key": "s3cret-key"}, HTTPStatus.FORBIDDEN),  # no key file: off
        (HUDI_DEFAULT_KEY, {"hudi-callback-key": HUDI_DEFAULT_KEY}, HTTPStatus.FORBIDDEN),  # public default
        ("s3cret-key", {}, HTTPStatus.UNAUTHORIZED),
        ("s3cret-key", {"hudi-callback-key": "wrong"}, HTTPStatus.UNAUTHORIZED),
        ("s3cret-key", {"authorization": "Bearer s3cret-key"}, HTTPStatus.UNAUTHORIZED),
    ],
)
def test_a_callback_without_the_right_key_changes_nothing(
    tmp_path: Path, key_content: str | None, headers: dict[str, str], status: HTTPStatus
) -> None:
    path = tmp_path / "callback.key"
    if key_content is not None:
        path.write_text(key_content)
    events = ChangeEvents()
    answer = CommitCallback(events, str(path) if key_content is not None else None).receive(
        headers, HUDI_BODY
    )
    assert answer.status == status
    assert events.pending() == 0


def test_a_rotated_key_takes_effect_at_once(key_file: Path) -> None:
    callback = CommitCallback(ChangeEvents(), str(key_file))
    assert callback.receive({"hudi-callback-key": "s3cret-key"}, HUDI_BODY).status == HTTPStatus.ACCEPTED
    key_file.write_text("rotated")
    assert callback.receive({"hudi-callback-key": "s3cret-key"}, HUDI_BODY).status == HTTPStatus.UNAUTHORIZED
    assert callback.receive({"hudi-callback-key": "rotated"}, HUDI_BODY).status == HTTPStatus.ACCEPTED


def test_the_queue_keeps_one_entry_a_table_and_wakes_a_waiter(monkeypatch: pytest.MonkeyPatch) -> None:
    events = ChangeEvents()
    assert not events.wait(0.05)
    woke: list[bool] = []
    waiter = threading.Thread(target=lambda: woke.append(events.wait(10.0)))
    waiter.start()
    time.sleep(0.1)
    started = time.monotonic()
    events.announce(Announcement("s3://b/t", "commit_callback", "1"))
    waiter.join(5)
    assert woke == [True]
    assert time.monotonic() - started < 1.0
    events.announce(Announcement("s3://b/t/", "commit_callback", "2"))
    assert events.pending() == 1  # one table, the newest event
    assert events.take()["s3://b/t"].instant == "2"
    assert events.announce(Announcement("s3://", "commit_callback")) is None  # no bucket: no place
    assert events.dropped["no_place"] == 1
    monkeypatch.setattr("hoodied.change_events.MAX_QUEUED", 1)
    events.announce(Announcement("s3://b/one", "commit_callback"))
    events.announce(Announcement("s3://b/two", "commit_callback"))
    assert set(events.take()) == {"s3://b/one"}
    assert events.dropped["queue_full"] == 1
    assert MAX_QUEUED >= 10_000
