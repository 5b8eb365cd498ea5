"""S3 Event Notifications through SQS (issue 34): the S3 server on 127.0.0.1 (moto) sends a bucket's object
events to its own SQS queue; the listener turns them into the tables whose timelines changed."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from hoodie.storage import Storage
from hoodied.change_events import ChangeEvents
from hoodied.s3_events import SqsListener, SqsSource, announcements_of, base_path_of
from support.s3_server import S3Server

pytestmark = pytest.mark.s3


@pytest.mark.parametrize(
    ("key", "base"),
    [
        ("lake/t/.hoodie/timeline/20260101000000000_20260101000001000.commit", "s3://b/lake/t"),
        ("t%2F.hoodie%2F20260101000000000.deltacommit.requested", "s3://b/t"),  # as events carry keys
        ("my+table/.hoodie/hoodie.properties", "s3://b/my table"),
        (".hoodie/timeline/20260101000000000.clean", "s3://b"),  # a table at the bucket's root
        ("t/.hoodie/timeline/history/manifest_3", "s3://b/t"),
        ("t/p0/f1_0-1-2_20260101000000000.parquet", None),
        ("t/.hoodie/.heartbeat/20260101000000000", None),
        ("t/.hoodie/.aux/hoodied/claims/x.claim", None),
        ("t/.hoodie/metadata/.hoodie/timeline/20260101000000000.deltacommit", None),
        ("t/.hoodie/", None),
        ("t/x.hoodie/timeline/1.commit", None),
    ],
)
def test_an_events_key_names_its_tables_base_path(key: str, base: str | None) -> None:
    assert base_path_of("b", key) == base


def test_test_events_and_foreign_records_name_no_table() -> None:
    assert announcements_of('{"Service":"Amazon S3","Event":"s3:TestEvent","Bucket":"b"}', 0.0) == ([], 0)
    assert announcements_of("not json", 0.0) == ([], 1)
    body = (
        '{"Records":[{"eventSource":"aws:s3","eventTime":"2026-11-28T08:39:53.699Z","s3":{"bucket":{"name":'
        '"b"},"object":{"key":"t/p/f.parquet"}}},{"eventSource":"aws:s3","eventTime":"2026-11-28T08:39:53.699Z",'
        '"s3":{"bucket":{"name":"b"},"object":{"key":"t/.hoodie/timeline/20260101000000000.commit"}}}]}'
    )
    found, ignored = announcements_of(body, 1_800_000_000.0)
    assert ignored == 1
    assert [a.base_path for a in found] == ["s3://b/t"]
    assert found[0].sent == pytest.approx(1_795_855_193.699)


@pytest.fixture
def queue(s3_server: S3Server) -> Iterator[tuple[str, str, Any]]:
    """A bucket whose timeline events go to a queue of its own: (bucket, queue URL, SQS client)."""
    endpoint = s3_server.endpoint
    sqs = boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1")
    name = f"events-{uuid.uuid4().hex[:8]}"
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    bucket = f"lake-{uuid.uuid4().hex[:8]}"
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_notification_configuration(
        Bucket=bucket,
        NotificationConfiguration={
            "QueueConfigurations": [{"QueueArn": arn, "Events": ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"]}]
        },
    )
    yield bucket, url, sqs
    sqs.delete_queue(QueueUrl=url)


def test_a_timeline_write_reaches_the_queue_and_names_its_table(
    s3_server: S3Server, queue: tuple[str, str, Any]
) -> None:
    bucket, url, sqs = queue
    events = ChangeEvents()
    listener = SqsListener(SqsSource(url, "us-east-1", s3_server.endpoint, wait_seconds=1), events)
    listener.receive_once()  # S3's test event
    assert events.take() == {}
    one = Storage.for_uri(f"s3://{bucket}/db/one")
    two = Storage.for_uri(f"s3://{bucket}/two")
    one.create(".hoodie/timeline/20260101000000000_20260101000001000.commit", b"{}")
    one.create("p0/f1_0-1-2_20260101000000000.parquet", b"x")  # data: no event for the poller
    two.create(".hoodie/timeline/20260101000000001.compaction.requested", b"{}")
    two.delete(".hoodie/timeline/20260101000000001.compaction.requested")
    deadline = time.monotonic() + 20
    taken: dict[str, Any] = {}
    while time.monotonic() < deadline and len(taken) < 2:
        listener.receive_once()
        taken.update(events.take())
    assert set(taken) == {f"s3://{bucket}/db/one", f"s3://{bucket}/two"}
    assert events.dropped["not_a_timeline"] >= 1
    assert events.lag["s3_sqs"] < 20
    # Read messages are deleted: nothing comes again.
    assert sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1).get("Messages") is None


def test_a_queue_that_cannot_be_read_is_retried_and_said_once(
    s3_server: S3Server, caplog: pytest.LogCaptureFixture
) -> None:
    missing = f"{s3_server.endpoint}/123456789012/no-such-queue-{uuid.uuid4().hex[:6]}"
    listener = SqsListener(
        SqsSource(missing, "us-east-1", s3_server.endpoint, wait_seconds=1), ChangeEvents()
    )
    with caplog.at_level(logging.ERROR, logger="hoodied.s3_events"):
        listener.start()
        time.sleep(3.5)  # attempts at 0, 1 and 3 s
        listener.stop()
    assert listener.counts["receive_failed"] >= 2
    said = [r for r in caplog.records if "cannot read the S3 event queue" in r.getMessage()]
    assert len(said) == 1, [r.getMessage() for r in said]
    assert "\n" not in said[0].getMessage()
