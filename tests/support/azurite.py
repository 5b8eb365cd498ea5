"""Azurite, Microsoft's Azure Storage emulator (npm ``azurite``), serving blobs on a free port of 127.0.0.1,
started as a real server and stopped by its PID; the Azure tests run against it.

:meth:`Azurite.environment` gives the variables Azure clients read for the emulator
(``AZURE_STORAGE_USE_EMULATOR``, ``AZURE_STORAGE_ACCOUNT_NAME``, ``AZURITE_BLOB_STORAGE_URL``): hoodie's
storage and hudi-rs both use them. ``.ci/install --test`` installs Azurite with npm into ``.make/npm``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import urllib.error
import urllib.request
from pathlib import Path

from azure.storage.blob import BlobServiceClient

from support.server_process import ServerProcess, free_port
from support.shared import REPO_ROOT

ACCOUNT = "devstoreaccount1"
#: Azurite's well-known development key (public, in Azurite's documentation).
ACCOUNT_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def azurite_binary() -> str | None:
    """``$AZURITE_BLOB``, the one ``.ci/install`` put in ``.make/npm``, or ``azurite-blob`` on ``PATH``."""
    candidates = [os.environ.get("AZURITE_BLOB"), str(REPO_ROOT / ".make/npm/node_modules/.bin/azurite-blob")]
    for c in candidates:
        if c and Path(c).exists():
            return c
    return shutil.which("azurite-blob")


def azurite_missing() -> str | None:
    if azurite_binary() is None:
        return "Azurite is not installed (.ci/install --test installs it with npm into .make/npm)"
    if shutil.which("node") is None:
        return "Azurite needs Node.js, which is not installed"
    return None


def _answers(url: str) -> bool:
    """Whether an Azurite service at ``url`` answers (an unsigned request is refused: it is up)."""
    try:
        urllib.request.urlopen(f"{url}/{ACCOUNT}?comp=list", timeout=2).close()
        return True
    except urllib.error.HTTPError:
        return True
    except (urllib.error.URLError, OSError):
        return False


class Azurite:
    """One Azurite blob server; :meth:`start`, then :meth:`stop` (kills it by PID)."""

    def __init__(self, work: Path) -> None:
        binary = azurite_binary()
        assert binary is not None
        self.work = work
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [binary, "--blobHost", "127.0.0.1", "--blobPort", str(self.port), "--location"]
        command += [str(work / "data"), "--skipApiVersionCheck", "--loose"]
        self._process = ServerProcess("Azurite", command, work / "azurite.log", self._answers)

    def environment(self) -> dict[str, str]:
        return {
            "AZURE_STORAGE_USE_EMULATOR": "true",
            "AZURE_STORAGE_ACCOUNT_NAME": ACCOUNT,
            "AZURITE_BLOB_STORAGE_URL": self.url,
        }

    def _answers(self) -> bool:
        return _answers(self.url)

    def start(self) -> None:
        self._process.start()

    def stop(self) -> None:
        self._process.stop()

    def container(self, name: str) -> str:
        """Create container ``name`` (if absent); returns ``az://name``."""
        connection = (
            f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};"
            f"BlobEndpoint={self.url}/{ACCOUNT};"
        )
        client = BlobServiceClient.from_connection_string(connection)
        with contextlib.suppress(Exception):  # ResourceExistsError when it is there
            client.create_container(name)
        return f"az://{name}"


def azurite_queue_binary() -> str | None:
    """``azurite-queue`` beside the blob server's binary (one npm package ships both)."""
    blob = azurite_binary()
    if blob is None:
        return None
    queue = Path(blob).with_name("azurite-queue")
    return str(queue) if queue.exists() else shutil.which("azurite-queue")


class AzuriteQueues:
    """Azurite's queue service on a free port of 127.0.0.1 (the storage queues Event Grid delivers blob
    events to); :meth:`start`, then :meth:`stop` (kills it by PID)."""

    def __init__(self, work: Path) -> None:
        binary = azurite_queue_binary()
        assert binary is not None
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [binary, "--queueHost", "127.0.0.1", "--queuePort", str(self.port), "--location"]
        command += [str(work / "data"), "--skipApiVersionCheck", "--loose"]
        self._process = ServerProcess("Azurite queues", command, work / "azurite-queue.log", self._answers)

    @property
    def connection_string(self) -> str:
        return (
            f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};"
            f"QueueEndpoint={self.url}/{ACCOUNT};"
        )

    def queue_url(self, name: str) -> str:
        return f"{self.url}/{ACCOUNT}/{name}"

    def _answers(self) -> bool:
        return _answers(self.url)

    def start(self) -> None:
        self._process.start()

    def stop(self) -> None:
        self._process.stop()


__all__ = ["ACCOUNT", "ACCOUNT_KEY", "Azurite", "AzuriteQueues", "azurite_binary", "azurite_missing"]
