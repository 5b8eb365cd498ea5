"""Local claims (``hoodied compact`` on one machine): a claim file created if absent, taken over from a
finished holder by compare-and-set, so that a run that read the dead holder and paused cannot take the claim
from the run that took it over meanwhile."""

from __future__ import annotations

import json
import os
import socket
import uuid
from pathlib import Path

import pytest

from hoodie.storage import Storage
from hoodied.claims import LocalClaim
from hoodied.errors import ClaimHeld, ClaimLost
from support.s3_server import S3Server


def _dead_holder(storage: Storage, claim: LocalClaim) -> None:
    """A claim file naming a process of this host that has ended (our pid, another start time)."""
    holder = {"token": "dead", "host": socket.gethostname(), "pid": os.getpid(), "process_start": -1}
    storage.create(claim.path, json.dumps(holder).encode("utf-8"))


def test_a_claim_is_exclusive_and_released(tmp_path: Path) -> None:
    storage = Storage.for_uri(str(tmp_path))
    with LocalClaim(storage, "compaction", "001") as first:
        with pytest.raises(ClaimHeld):
            LocalClaim(storage, "compaction", "001").acquire()
        first.check()
    assert not storage.exists(first.path)


def test_a_finished_holders_claim_is_taken_over(tmp_path: Path) -> None:
    storage = Storage.for_uri(str(tmp_path))
    claim = LocalClaim(storage, "compaction", "001")
    _dead_holder(storage, claim)
    claim.acquire()
    claim.check()
    holder = claim.holder()
    assert holder is not None
    assert holder["pid"] == os.getpid()
    assert holder["token"] != "dead"
    claim.release()


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def table_storage(request: pytest.FixtureRequest, tmp_path: Path) -> Storage:
    if request.param == "local":
        return Storage.for_uri(str(tmp_path))
    server: S3Server = request.getfixturevalue("s3_server")
    return Storage.for_uri(f"{server.bucket('claims')}/t-{uuid.uuid4().hex[:8]}")


def test_a_stale_takeover_fails_and_changes_nothing(table_storage: Storage) -> None:
    """Two runs find the same dead holder; the one that read it first pauses while the other takes the claim
    over. Woken, its takeover (conditional on the version it read) fails and the winner's claim stands; it
    then sees a live holder. Before, a delete-then-create let both believe they held the claim."""
    storage = table_storage
    late, winner = LocalClaim(storage, "compaction", "001"), LocalClaim(storage, "compaction", "001")
    _dead_holder(storage, late)
    found = late._holder_versioned()  # the late run reads the dead holder and its version, then pauses
    assert found is not None
    winner.acquire()
    taken = storage.read(winner.path)
    assert late._take_over(*found) is False  # wakes: its compare-and-set finds another version
    assert storage.read(winner.path) == taken
    winner.check()
    with pytest.raises(ClaimHeld):  # the winner (this live process) holds it
        late.acquire()
    with pytest.raises(ClaimLost):
        late.check()
    winner.release()
