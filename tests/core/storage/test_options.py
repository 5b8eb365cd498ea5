"""What a task carries to another host: the storage options, plus the driver's store variables for the
settings the options leave open (never for local paths, never over an option the user set)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hoodie.storage import Storage, StorageRef
from hoodie.storage.options import AZURITE_URL_OPTION, AZURITE_URL_VARIABLE, backend_for, portable_options
from support.s3_server import S3Server

ENV = {
    "AWS_ACCESS_KEY_ID": "env-key",
    "AWS_SECRET_ACCESS_KEY": "env-secret",
    "AWS_DEFAULT_REGION": "eu-west-1",
    "AWS_REGION": "us-east-2",
    "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
    "AZURE_STORAGE_ACCOUNT_KEY": "azure-key",
    "HOME": "/root",
}


def test_the_environment_fills_only_what_the_options_leave_open() -> None:
    out = portable_options("s3://bucket/table", {"access_key": "opt-key"}, ENV)
    assert out == {
        "access_key": "opt-key",  # the user's spelling kept; the environment's key not added beside it
        "secret_access_key": "env-secret",
        "region": "us-east-2",  # AWS_REGION wins over AWS_DEFAULT_REGION
        "endpoint": "http://127.0.0.1:9",
    }


def test_every_spelling_of_an_option_counts_as_set() -> None:
    for key in ("AWS_SECRET_ACCESS_KEY", "aws_secret_access_key", "secret_access_key", "secret_key"):
        assert portable_options("s3a://b/t", {key: "mine"}, ENV).get("secret_access_key") in (None, "mine")
        assert "env-secret" not in portable_options("s3a://b/t", {key: "mine"}, ENV).values()
    assert "endpoint" not in portable_options("s3://b/t", {"endpoint_override": "127.0.0.1:1"}, ENV)


def test_only_the_store_of_the_uri_takes_its_variables() -> None:
    assert portable_options("abfs://c@acct.dfs.core.windows.net/t", {}, ENV) == {"account_key": "azure-key"}
    assert portable_options("gs://b/t", {}, ENV) == {}
    assert portable_options("/data/table", {"x": "y"}, ENV) == {"x": "y"}
    assert portable_options("hdfs://nn/t", {}, ENV) == {}


def test_a_ref_hides_what_it_carries(tmp_path: Path) -> None:
    ref = StorageRef("s3://b/t", tuple(sorted(portable_options("s3://b/t", {}, ENV).items())))
    assert "env-secret" not in repr(ref)
    assert "env-key" not in repr(ref)
    local = Storage.for_uri(str(tmp_path)).ref()
    assert local.options == ()


def test_azurites_address_travels_and_is_set_where_the_store_opens(monkeypatch: pytest.MonkeyPatch) -> None:
    """object_store reads Azurite's address from the environment alone: a task carries it as an option, and
    opening the store sets the variable in the task's process (else it looks at 127.0.0.1:10000)."""
    env = {"AZURE_STORAGE_USE_EMULATOR": "true", AZURITE_URL_VARIABLE: "http://127.0.0.1:23456"}
    carried = portable_options("az://lake/t", {}, env)
    assert carried == {"use_emulator": "true", AZURITE_URL_OPTION: "http://127.0.0.1:23456"}
    assert portable_options("s3://b/t", {}, env) == {}
    monkeypatch.delenv(AZURITE_URL_VARIABLE, raising=False)
    backend_for("az://lake/t", carried)
    assert os.environ[AZURITE_URL_VARIABLE] == "http://127.0.0.1:23456"


def test_a_client_option_given_keeps_the_environments_allow_http(s3_server: S3Server) -> None:
    """Client options replace the HTTP client's whole set, so ``timeout`` alone used to drop the
    environment's ``AWS_ALLOW_HTTP``, and every request to an http endpoint (MinIO, moto) was refused."""
    assert os.environ.get("AWS_ALLOW_HTTP") == "true"
    storage = Storage.for_uri(f"{s3_server.bucket('options')}/t", {"timeout": "5s"})
    storage.create("a.txt", b"over http")
    assert storage.read("a.txt") == b"over http"
