"""hoodied.azure_events: blob events Event Grid delivers to an Azure Storage queue announce their tables.

Azurite serves queues but does not raise blob events (Event Grid is a cloud service), so the real queue on
127.0.0.1 is given the messages exactly as Event Grid writes them (one event a message, Base64-encoded JSON
in Event Grid's schema, or raw CloudEvents), and the listener reads, announces and deletes them.
"""

from __future__ import annotations

import base64
import json
import logging
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from azure.storage.queue import QueueClient

from hoodie.storage.identity import table_identity
from hoodied.azure_events import (
    AzureQueueListener,
    AzureQueueRefused,
    AzureQueueSource,
    announcements_of,
    queue_client,
)
from hoodied.change_events import ChangeEvents
from hoodied.config import DaemonConfig
from support.azurite import ACCOUNT, AzuriteQueues, azurite_missing

ROOT = "abfss://lake@lakeacct.dfs.core.windows.net"
TOPIC = "/subscriptions/0000/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/lakeacct"


def _event_grid(
    container: str, blob: str, kind: str = "Microsoft.Storage.BlobCreated", **more: Any
) -> dict[str, Any]:
    return {
        "topic": TOPIC,
        "subject": f"/blobServices/default/containers/{container}/blobs/{blob}",
        "eventType": kind,
        "eventTime": "2026-11-28T10:00:00.1234567Z",
        "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{container}/{blob}")),
        "data": {"api": "PutBlob", "url": f"https://lakeacct.blob.core.windows.net/{container}/{blob}"},
        "dataVersion": "",
        "metadataVersion": "1",
        **more,
    }


def _encoded(event: object) -> str:
    return base64.b64encode(json.dumps(event).encode()).decode()


@pytest.mark.parametrize(
    ("blob", "base"),
    [
        ("db/orders/.hoodie/timeline/20261128100000000.commit", f"{ROOT}/db/orders"),
        (".hoodie/hoodie.properties", ROOT),
        ("db/orders/p0/f1_0-1-2_20261128100000000.parquet", None),
        ("db/orders/.hoodie/.heartbeat/20261128100000000", None),
        ("db/orders/.hoodie/metadata/.hoodie/20261128100000000.deltacommit", None),
    ],
)
def test_an_event_grid_message_names_its_tables_base_path(blob: str, base: str | None) -> None:
    announced, ignored = announcements_of(_encoded(_event_grid("lake", blob)), time.time())
    assert [a.base_path for a in announced] == ([base] if base else [])
    assert ignored == (0 if base else 1)
    if announced:
        assert announced[0].source == "azure_queue"
        assert announced[0].sent is not None
        assert abs(announced[0].sent - 1795860000.123456) < 1.0


def test_cloud_events_lists_the_emulator_and_other_clouds_are_read() -> None:
    cloud_event = {
        "specversion": "1.0",
        "source": TOPIC,
        "subject": "/blobServices/default/containers/lake/blobs/t/.hoodie/timeline/1.commit",
        "type": "Microsoft.Storage.BlobDeleted",
        "time": "2026-11-28T10:00:00Z",
        "data": {},
    }
    emulator = _event_grid("lake", "t2/.hoodie/x.commit", topic="")
    emulator["data"]["url"] = f"http://127.0.0.1:10000/{ACCOUNT}/lake/t2/.hoodie/x.commit"
    china = _event_grid("lake", "t3/.hoodie/x.commit", topic="")
    china["data"]["url"] = "https://cnacct.blob.core.chinacloudapi.cn/lake/t3/.hoodie/x.commit"
    announced, ignored = announcements_of(json.dumps([cloud_event, emulator, china]), time.time())
    assert [a.base_path for a in announced] == [
        "abfss://lake@lakeacct.dfs.core.windows.net/t",
        f"abfss://lake@{ACCOUNT}.dfs.core.windows.net/t2",
        "abfss://lake@cnacct.dfs.core.chinacloudapi.cn/t3",
    ]
    assert ignored == 0
    # Every spelling of the table is one identity: the announcement finds it.
    assert table_identity(announced[1].base_path) == table_identity("az://lake/t2", {"account_name": ACCOUNT})


@pytest.mark.parametrize(
    "body",
    [
        "not base64 at all!",
        _encoded({"no": "event"}),
        _encoded(_event_grid("lake", "t/.hoodie/x.commit", kind="Microsoft.Storage.BlobTierChanged")),
        json.dumps("a string"),
    ],
    ids=["not-base64", "not-an-event", "another-event-type", "a-json-string"],
)
def test_what_is_not_a_blob_event_names_no_table(body: str) -> None:
    announced, ignored = announcements_of(body, time.time())
    assert announced == []
    assert ignored == 1


def test_a_queue_without_credentials_is_refused_naming_what_was_looked_for() -> None:
    source = AzureQueueSource("https://lakeacct.queue.core.windows.net/hudi-events")
    looked_for = "AZURE_STORAGE_CONNECTION_STRING and AZURE_STORAGE_ACCOUNT_KEY"
    with pytest.raises(AzureQueueRefused, match=looked_for):
        queue_client(source, environ={})
    with pytest.raises(AzureQueueRefused, match="not a queue's URL"):
        queue_client(AzureQueueSource("https://lakeacct.queue.core.windows.net/"), environ={})


def test_the_configuration_names_azure_queues() -> None:
    config = DaemonConfig.parse(
        "notifications: {azure_queues: [{queue_url: 'https://a.queue.core.windows.net/q', idle_wait: 2s}]}\n"
        "tables: [/data/t]\n"
    )
    (queue,) = config.notifications.azure_queues
    assert (queue.queue_url, queue.idle_wait) == ("https://a.queue.core.windows.net/q", 2.0)


@pytest.fixture(scope="module")
def queues(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AzuriteQueues]:
    missing = azurite_missing()
    if missing:
        pytest.skip(missing)
    server = AzuriteQueues(tmp_path_factory.mktemp("azurite-queues"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.azure
def test_events_on_a_real_queue_announce_their_tables_and_are_deleted(queues: AzuriteQueues) -> None:
    name = f"events-{uuid.uuid4().hex[:8]}"
    sender = QueueClient.from_connection_string(queues.connection_string, name)
    sender.create_queue()
    # (No topic: the account comes from the blob's URL.)
    sender.send_message(_encoded(_event_grid("lake", "db/one/.hoodie/timeline/1_2.commit", topic="")))
    sender.send_message(_encoded(_event_grid("lake", "db/one/p0/f_0-1-2_1.parquet")))  # data: dropped
    sender.send_message(_encoded(_event_grid("lake", "two/.hoodie/timeline/3.compaction.requested")))
    events = ChangeEvents()
    source = AzureQueueSource(queues.queue_url(name))
    client = queue_client(source, {"AZURE_STORAGE_CONNECTION_STRING": queues.connection_string})
    listener = AzureQueueListener(source, events, client=client)
    assert listener.receive_once() == 3
    taken = events.take()
    assert set(taken) == {
        table_identity(f"abfss://lake@lakeacct.dfs.core.windows.net/{t}") for t in ("db/one", "two")
    }
    assert events.dropped["not_a_timeline"] == 1
    assert listener.receive_once() == 0  # read messages are deleted
    assert list(sender.peek_messages()) == []


@pytest.mark.azure
def test_a_queue_that_cannot_be_read_is_retried_and_said_once(
    queues: AzuriteQueues, caplog: pytest.LogCaptureFixture
) -> None:
    source = AzureQueueSource(queues.queue_url(f"missing-{uuid.uuid4().hex[:6]}"), idle_wait=1.0)
    client = queue_client(source, {"AZURE_STORAGE_CONNECTION_STRING": queues.connection_string})
    listener = AzureQueueListener(source, ChangeEvents(), client=client)
    with caplog.at_level(logging.ERROR, logger="hoodied.azure_events"):
        listener.start()
        time.sleep(3.5)
        listener.stop(timeout=5)
    assert listener.counts["receive_failed"] >= 2
    said = [r for r in caplog.records if "cannot read the Azure event queue" in r.getMessage()]
    assert len(said) == 1, [r.getMessage() for r in said]
    assert "\n" not in said[0].getMessage()
