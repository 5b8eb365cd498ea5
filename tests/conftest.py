"""Shared test fixtures: the real Hudi tables in ``../shared/fixtures`` and the hudi-rs oracle.

Fixture tables are zips (``fixtures/tables/<source>/<name>.zip``) holding one or more tables; a table's base
path is a folder with ``.hoodie/hoodie.properties`` (never one below ``.hoodie/metadata``, never in
``__MACOSX``). They are found at collection time by reading the zips' listings, and unzipped at most once per
session into a temporary folder; tests that change a table take a fresh copy (:func:`table_copy`).

Tests ask for tables by parameter name and are parametrized here (``pytest_generate_tests``):

- ``fixture_table``: every table in every zip;
- ``supported_table`` / ``unsupported_table``: those we must read / must refuse (table version 3, 4, 5, 7 or
  base file format LANCE, ORC, HFILE).

The fixtures live outside the repository (``HOODIE_FIXTURES`` or ``<repo>/../shared/fixtures``); where they
are absent, those tests skip and say where they looked.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from support.fixture_tables import (
    FixtureCache,
    FixtureTable,
    discover_tables,
    fixtures_missing_reason,
)
from support.hudi_oracle import HudiOracle
from support.schedule import LONGEST_FILES
from support.shared import fixtures_dir

# No test may reach a cloud's instance-metadata endpoint (only 127.0.0.1 is ours): a store with no credentials
# fails at once instead of asking it (hoodie.storage.credentials), in this process and every child's.
os.environ["AWS_EC2_METADATA_DISABLED"] = "true"

# -- parametrization ---------------------------------------------------------------------------------------

_SELECTORS: dict[str, Callable[[FixtureTable], bool]] = {
    "fixture_table": lambda t: True,
    "supported_table": lambda t: t.refusal is None,
    "unsupported_table": lambda t: t.refusal is not None,
    "supported_mor_table": lambda t: t.refusal is None and t.is_mor,
    "metadata_fixture_table": lambda t: (
        t.refusal is None and bool(t.props.get("hoodie.table.metadata.partitions", "").strip())
    ),
}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    for argname, select in _SELECTORS.items():
        if argname not in metafunc.fixturenames:
            continue
        missing = fixtures_missing_reason()
        if missing:
            metafunc.parametrize(argname, [pytest.param(None, marks=pytest.mark.skip(reason=missing))])
            continue
        tables = [t for t in discover_tables() if select(t)]
        metafunc.parametrize(argname, tables, ids=[t.id for t in tables])


# -- scheduling --------------------------------------------------------------------------------------------

TESTS_DIR = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FILES)}

    def first_the_longest(item: pytest.Item) -> int:
        try:
            name = item.path.resolve().relative_to(TESTS_DIR).as_posix()
        except ValueError:
            return len(rank)
        return rank.get(name, len(rank))

    items.sort(key=first_the_longest)  # stable: each file's tests keep their order


# -- fixtures ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def fixtures_path() -> Path:
    """The fixtures folder; skips when it is absent."""
    missing = fixtures_missing_reason()
    if missing:
        pytest.skip(missing)
    return fixtures_dir()


@pytest.fixture(scope="session")
def fixture_cache(tmp_path_factory: pytest.TempPathFactory, fixtures_path: Path) -> FixtureCache:
    """Unzipped fixture tables, shared by the session (read them; copy them before changing anything)."""
    return FixtureCache(tmp_path_factory.mktemp("fixture_tables"))


@pytest.fixture(scope="session")
def fixture_tables(fixtures_path: Path) -> tuple[FixtureTable, ...]:
    """Every table of every fixture zip (read from the zips' listings; nothing is unzipped)."""
    return discover_tables()


@pytest.fixture(scope="session")
def fixture_root(fixture_cache: FixtureCache) -> Callable[[str], Path]:
    """Look a fixture table up by its id (``FixtureTable.id``) and return its unzipped base path."""

    def find(table_id: str) -> Path:
        for table in discover_tables():
            if table.id == table_id:
                return fixture_cache.root(table)
        known = ", ".join(t.id for t in discover_tables())
        raise LookupError(f"no fixture table {table_id!r}; the fixtures hold: {known}")

    return find


@pytest.fixture
def table_copy(tmp_path: Path, fixture_cache: FixtureCache) -> Callable[[FixtureTable | Path], Path]:
    """A factory of fresh copies (in this test's tmp_path) of a fixture table or of any table folder."""
    count = 0

    def copy(table: FixtureTable | Path) -> Path:
        nonlocal count
        count += 1
        source = fixture_cache.root(table) if isinstance(table, FixtureTable) else table
        target = tmp_path / f"copy{count}" / source.name
        shutil.copytree(source, target, symlinks=True)
        for path in [target, *target.rglob("*")]:  # read-only sources (bad-input vectors) stay writable here
            path.chmod(path.stat().st_mode | 0o200)
        return target

    return copy


@pytest.fixture(scope="session")
def hudi_oracle(tmp_path_factory: pytest.TempPathFactory) -> HudiOracle:
    """hudi-rs, run in child processes, answers cached for the session."""
    return HudiOracle(tmp_path_factory.mktemp("hudi_oracle"))


# -- ZooKeeper ---------------------------------------------------------------------------------------------
# (imported here rather than at the top so that the section stays in one piece; see
# tests/support/zk_server.py)

from collections.abc import Iterator  # noqa: E402

from support.zk_server import ZooKeeperServer, zookeeper_available  # noqa: E402


@pytest.fixture(scope="session")
def zookeeper_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """A real ZooKeeper server on 127.0.0.1 for the whole session; skips where java or its jars are absent."""
    missing = zookeeper_available()
    if missing:
        pytest.skip(missing)
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"))
    server.start()
    yield server
    server.stop()


# -- the S3-compatible server --------------------------------------------------------------------------------

from support.s3_faults import FaultProxy  # noqa: E402
from support.s3_server import S3Server, moto_available  # noqa: E402


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """moto's S3 server on 127.0.0.1 for the whole session, its address and credentials in the standard
    environment variables (so hoodie's storage, hudi-rs and hoodied subprocesses all find it)."""
    missing = moto_available()
    if missing:
        pytest.skip(missing)
    yield from _serving(S3Server(tmp_path_factory.mktemp("s3")))


@pytest.fixture
def s3_faults(s3_server: S3Server) -> Iterator[FaultProxy]:
    """A fault-injecting proxy in front of the session's S3 server, for this test (no fault until one is
    injected). The environment keeps pointing at the server itself, so the judges (hudi-rs, boto3) read the
    store undisturbed; the code under test reaches the proxy through the storage option ``endpoint``
    (:meth:`FaultProxy.storage_options`). The bucket ``lake`` is there."""
    s3_server.bucket("lake")
    with FaultProxy(s3_server.endpoint) as proxy:
        yield proxy


# -- Azurite (the Azure Storage emulator) --------------------------------------------------------------------

from support.azurite import Azurite, azurite_missing  # noqa: E402


@pytest.fixture(scope="session")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Azurite]:
    """Azurite on 127.0.0.1 for the whole session, its address in the emulator's environment variables."""
    missing = azurite_missing()
    if missing:
        pytest.skip(missing)
    yield from _serving(Azurite(tmp_path_factory.mktemp("azurite")))


# -- fake-gcs-server (the GCS emulator) ---------------------------------------------------------------------

from support.gcs_server import OTHER_CREDENTIALS, GcsServer, gcs_missing  # noqa: E402


@pytest.fixture(scope="session")
def gcs_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GcsServer]:
    """fake-gcs-server behind its XML front on 127.0.0.1 for the whole session, reached through
    ``GOOGLE_SERVICE_ACCOUNT_KEY`` (no OAuth: no credential is fetched, the GCE metadata server never asked;
    other GCS credential variables are removed for the session)."""
    missing = gcs_missing()
    if missing:
        pytest.skip(missing)
    saved = {k: os.environ.pop(k) for k in OTHER_CREDENTIALS if k in os.environ}
    try:
        yield from _serving(GcsServer(tmp_path_factory.mktemp("gcs")))
    finally:
        os.environ.update(saved)


_Server = TypeVar("_Server", S3Server, Azurite, GcsServer)


def _serving(server: _Server) -> Iterator[_Server]:
    """Run ``server`` with its environment variables set for the session; stop it and restore them after."""
    server.start()
    saved = {k: os.environ.get(k) for k in server.environment()}
    os.environ.update(server.environment())
    try:
        yield server
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        server.stop()
