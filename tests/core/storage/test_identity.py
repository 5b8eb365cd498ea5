"""A table's identity (``hoodie.storage.identity``): every spelling of one base path gives one identity, on
the local file system (real symbolic links) and on every object store; different places never share one;
credentials never show."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hoodie.errors import StorageError
from hoodie.storage import Storage
from hoodie.storage.identity import STORE_OF_SCHEME, table_identity
from hoodie.storage.options import backend_for


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    """``<tmp>/lake/t``, a real folder (its real path: tmp_path may itself lie behind a link)."""
    table = tmp_path / "lake" / "t"
    table.mkdir(parents=True)
    return Path(os.path.realpath(table))


def test_every_spelling_of_a_local_path_is_its_real_path(lake: Path, tmp_path: Path) -> None:
    parent = lake.parent
    spellings = [
        str(lake),
        f"{parent}//t",
        f"{parent}/t/",
        f"{parent}/t//",
        f"{parent}/./t",
        f"{parent}/../{parent.name}/t",
        f"/{lake}",  # a leading // (POSIX leaves its meaning to the system; Linux: /)
        f"file://{lake}",
        f"file:{lake}",
        f"file://localhost{lake}",
        f"file://{parent}//t/",
    ]
    assert {table_identity(s) for s in spellings} == {str(lake)}


def test_a_relative_path_is_resolved_against_the_working_folder(
    lake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(lake.parent)
    assert table_identity("t") == table_identity("./t/") == str(lake)


def test_symbolic_links_are_followed(lake: Path, tmp_path: Path) -> None:
    """A link to the table, a link to a folder above it, and a link to a link all name the table."""
    (tmp_path / "alias").symlink_to(lake)
    (tmp_path / "lake2").symlink_to(lake.parent)
    (tmp_path / "alias2").symlink_to(tmp_path / "alias")
    for spelling in (tmp_path / "alias", tmp_path / "lake2" / "t", tmp_path / "alias2"):
        assert table_identity(str(spelling)) == str(lake), spelling
        assert table_identity(f"file://{spelling}/") == str(lake), spelling


def test_a_link_loop_resolves_to_the_folder_it_leads_back_to(lake: Path) -> None:
    (lake.parent / "loop").symlink_to(lake.parent)
    assert table_identity(f"{lake.parent}/loop/loop/loop/t") == str(lake)


def test_the_identity_of_a_local_table_opens_it(lake: Path, tmp_path: Path) -> None:
    """A local identity is a plain path: the place the backend opens for each spelling."""
    (tmp_path / "alias").symlink_to(lake)
    Storage.for_uri(str(lake)).create("f", b"x")
    for spelling in (f"{lake}/", f"file://{tmp_path}/alias", f"{lake.parent}//t"):
        assert Storage.for_uri(table_identity(spelling)).read("f") == b"x"
        assert Storage.for_uri(spelling).read("f") == b"x"


def test_different_local_tables_have_different_identities(lake: Path) -> None:
    other = lake.parent / "t2"
    other.mkdir()
    assert table_identity(str(lake)) != table_identity(str(other))
    assert table_identity(str(lake)) != table_identity(str(lake.parent))


@pytest.mark.parametrize(
    "spellings",
    [
        pytest.param(
            [
                "s3://bucket/warehouse/t",
                "s3a://bucket/warehouse/t",
                "s3n://bucket/warehouse/t",
                "S3A://bucket/warehouse/t",
                "s3://BUCKET/warehouse/t",
                "s3://bucket/warehouse//t/",
                "s3://bucket//warehouse/t//",
                "s3://AKIA123:s3cret@bucket/warehouse/t",
                "s3a://AKIA123@bucket/warehouse/t",
                "s3://bucket/warehouse/t?versionId=1",
                "s3://bucket/warehouse/t#x",
            ],
            id="s3",
        ),
        pytest.param(
            ["gs://bucket/t", "gcs://bucket/t", "gs://bucket/t/", "gcs://bucket//t", "gs://u:p@bucket/t"],
            id="gcs",
        ),
        pytest.param(
            [
                "abfss://data@acct.dfs.core.windows.net/lake/t",
                "abfs://data@acct.dfs.core.windows.net/lake/t",
                "abfss://data@acct.blob.core.windows.net/lake/t",
                "abfss://DATA@ACCT.dfs.core.windows.net/lake//t/",
                "abfss://data:secret@acct.dfs.core.windows.net/lake/t",
                "abfss://data@acct.dfs.core.windows.net/lake/t?sv=2022&sig=SIGNATURE",
            ],
            id="azure",
        ),
    ],
)
def test_every_spelling_of_an_object_store_uri_is_one_identity(spellings: list[str]) -> None:
    identities = {table_identity(s) for s in spellings}
    assert len(identities) == 1, identities
    (identity,) = identities
    for secret in ("s3cret", "AKIA123", "secret", "SIGNATURE", "u:p"):
        assert secret not in identity


def test_object_store_identities_are_canonical_uris() -> None:
    assert table_identity("s3a://Bucket/a//b/") == "s3://bucket/a/b"
    assert table_identity("s3://bucket") == table_identity("s3://bucket/") == "s3://bucket"
    assert table_identity("gcs://b/t/") == "gs://b/t"
    assert table_identity("abfs://c@acct.dfs.core.windows.net/t") == "abfss://c@acct.dfs.core.windows.net/t"
    # Dots are characters of an object key, not steps: the store keeps a/./b apart from a/b.
    assert table_identity("s3://b/a/./t") == "s3://b/a/./t"
    assert table_identity("hdfs://u@NameNode:8020//lake/t/") == "hdfs://namenode:8020/lake/t"


def test_an_az_uri_takes_its_account_where_the_client_does() -> None:
    """``az://container/path`` names no account: the storage options' account, else the environment's,
    makes it the same identity as the abfss form; without either it stays an ``az://`` identity."""
    abfss = table_identity("abfss://data@acct.dfs.core.windows.net/lake/t")
    assert table_identity("az://data/lake/t", {"account_name": "acct"}, environ={}) == abfss
    assert table_identity("az://data/lake/t/", {"AZURE_STORAGE_ACCOUNT_NAME": "ACCT"}, environ={}) == abfss
    assert table_identity("az://data/lake/t", environ={"AZURE_STORAGE_ACCOUNT_NAME": "acct"}) == abfss
    assert table_identity("az://data//lake/t", environ={}) == "az://data/lake/t"
    # The options' account wins over the URI's, as the client takes it (hoodie.storage.options).
    assert (
        table_identity("abfss://data@other.dfs.core.windows.net/lake/t", {"account_name": "acct"}, environ={})
        == abfss
    )


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("s3://bucket/t", "s3://bucket/t2"),
        ("s3://bucket/t", "s3://bucket2/t"),
        ("s3://bucket/t", "gs://bucket/t"),
        ("s3://bucket/a/t", "s3://bucket/t"),
        ("abfss://c1@acct.dfs.core.windows.net/t", "abfss://c2@acct.dfs.core.windows.net/t"),
        ("abfss://c@acct1.dfs.core.windows.net/t", "abfss://c@acct2.dfs.core.windows.net/t"),
        ("s3://bucket/T", "s3://bucket/t"),  # keys are case-sensitive
    ],
)
def test_different_places_have_different_identities(a: str, b: str) -> None:
    assert table_identity(a, environ={}) != table_identity(b, environ={})


def test_every_scheme_with_an_identity_opens_a_store() -> None:
    """The aliases the identity folds together are the ones the backends open (s3n included)."""
    for scheme, store in STORE_OF_SCHEME.items():
        if store == "az":
            uri, options = f"{scheme}://c@acct.dfs.core.windows.net/t", {"account_name": "acct"}
        else:
            uri, options = f"{scheme}://b/t", {"region": "us-east-1"} if store == "s3" else {}
        assert backend_for(uri, options).root == "t", scheme


@pytest.mark.parametrize("uri", ["", "  ", "s3:///t", "gs://", "abfss://acct.dfs.core.windows.net/t"])
def test_a_uri_naming_no_place_is_refused(uri: str) -> None:
    with pytest.raises(StorageError):
        table_identity(uri, environ={})
