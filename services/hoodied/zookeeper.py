"""ZooKeeper for hoodied's replicas: one session per daemon, the claims on instants, and the table lock.

One :class:`ZooKeeper` per daemon process owns a kazoo client, hence one ZooKeeper session; the session is
the replica's heartbeat. Everything that depends on it follows one rule, as FORMAT.md says for Hudi's
writers: **a session that was SUSPENDED or LOST at any moment voids whatever was held through it**, even
when the connection comes back with the same session. ZooKeeper cannot tell us whether another process
took over while we were cut off, so we assume it did.

- The connection state is ``CONNECTED``, ``SUSPENDED``, ``LOST`` (kazoo's) or ``CLOSED`` (before
  :meth:`ZooKeeper.start`, after :meth:`ZooKeeper.stop`). kazoo reports changes on its own event thread,
  which must never block; we only note them there (a counter of interruptions, the *epoch*, bumped on every
  SUSPENDED, LOST and CLOSED) and hand them to a dispatcher thread of ours, which runs the listeners of
  :meth:`ZooKeeper.add_listener` and the ``on_lost`` callbacks of claims. Nothing here holds our own lock
  while talking to ZooKeeper.
- A claim (:meth:`ZooKeeper.claim`) is an ephemeral node ``<base_path>/claims/<scope>/<name>`` holding the
  replica's identity, ``claimed_at_ms`` and a random ``token``; taking it is a single create, so it never
  waits. :meth:`ZooKeeperClaim.check` (the commit fence) requires the session uninterrupted since the claim
  was taken, the client CONNECTED, and the node still owned by our session with our token. Releasing
  deletes the node only when it is still ours (a version-checked delete).
- The table lock (:meth:`ZooKeeper.table_lock`) is kazoo's ``Lock`` recipe made to live with Apache
  Curator's ``InterProcessMutex``, which Hudi's ``ZookeeperBasedLockProvider`` takes at the same path.
  Curator names contenders ``_c_<uuid>-lock-<seq>`` and orders the children of the lock node by the text
  after the last ``lock-`` (the 10-digit sequence); a name without ``lock-`` sorts by its whole text.
  kazoo 2.10 orders contenders by the 10 digits after any of its patterns (``__lock__``, plus
  ``extra_lock_patterns``) and compares them as strings. Our nodes are ``<uuid hex>-lock-<seq>``: Curator
  sorts them by sequence, and with ``extra_lock_patterns=("-lock-",)`` kazoo counts Curator's nodes (and
  stock kazoo locks' ``__lock__`` nodes) as contenders. Sequence numbers come from one counter per parent
  node, so both sides agree on the order: the lowest sequence holds the lock.

Nodes whose fate is unknown (a create or delete interrupted by a lost connection, a release while
SUSPENDED) are remembered and deleted, if still ours, when the connection is back: a session that
survives would otherwise keep them, and block other replicas, for as long as this process lives.
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Self

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    CancelledError,
    KazooException,
    NodeExistsError,
    NoNodeError,
)
from kazoo.exceptions import LockTimeout as KazooLockTimeout
from kazoo.recipe.lock import Lock
from kazoo.security import CREATOR_ALL_ACL, OPEN_ACL_UNSAFE

from hoodie.errors import LockError, LockLost, LockTimeout
from hoodie.lock import AcquireOnEnter
from hoodied.errors import ClaimHeld, ClaimLost, ServiceError

logger = logging.getLogger(__name__)

CONNECTED: Final = "CONNECTED"
SUSPENDED: Final = "SUSPENDED"
LOST: Final = "LOST"
CLOSED: Final = "CLOSED"

DEFAULT_BASE_PATH = "/hoodied"
DEFAULT_SESSION_TIMEOUT_SECONDS = 30.0
DEFAULT_CONNECTION_TIMEOUT_SECONDS = 15.0
DEFAULT_ACQUIRE_TIMEOUT_SECONDS = 60.0
#: ``acl`` values: ``open`` = world:anyone may do anything; ``creator`` = all rights to the identity that
#: created the node (needs ``auth``). They apply to the nodes hoodied creates (claims, lock contenders and
#: any missing parents).
ACL_MODES: Final = ("open", "creator")

CLAIMS_FOLDER = "claims"
#: The part of a lock contender's name that Curator's ``InterProcessMutex`` sorts by (what follows it).
CURATOR_LOCK_MARK = "-lock-"

# Reconnect for as long as the daemon runs, at most a second apart; retry single commands a few times.
_CONNECTION_RETRY: Final = {"max_tries": -1, "delay": 0.1, "backoff": 2, "max_delay": 1.0}
_COMMAND_RETRY: Final = {"max_tries": 3, "delay": 0.1, "backoff": 2, "max_delay": 1.0}
_CLAIM_ATTEMPTS = 3
_STOP_EVENT: Final = "<stop>"


def validate_path(path: str, what: str = "path") -> str:
    """An absolute ZooKeeper path (``/a/b``; ``/`` itself allowed), else ValueError naming it."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise ValueError(f"{what} {path!r} is not an absolute ZooKeeper path")
    if path != "/":
        for segment in path[1:].split("/"):
            if segment in ("", ".", ".."):
                raise ValueError(f"{what} {path!r} is not a valid ZooKeeper path (segment {segment!r})")
    return path


def validate_segment(value: str, what: str) -> str:
    """One path segment: not empty, no ``/``, not ``.`` or ``..``; else ValueError naming it."""
    if not isinstance(value, str) or not value or "/" in value or value in (".", ".."):
        raise ValueError(
            f"{what} {value!r} must be a single ZooKeeper path segment (no '/', not '.' or '..')"
        )
    return value


def _join(base: str, *segments: str) -> str:
    return "/".join([base.rstrip("/"), *segments])


def _describe_holder(holder: Mapping[str, object]) -> str:
    replica, host, pid = (holder.get(key, "?") for key in ("replica", "host", "pid"))
    return f"replica {replica} on host {host} (pid {pid})"


def _parse_holder(data: bytes | None) -> dict[str, object]:
    try:
        value = json.loads(data or b"")
    except ValueError:
        return {"unreadable": (data or b"")[:80].decode("utf-8", "replace")}
    return value if isinstance(value, dict) else {"unreadable": str(value)[:80]}


@dataclass(frozen=True)
class ZooKeeperConfig:
    """How to reach ZooKeeper and where hoodied's nodes live.

    ``connect`` is ``host:port[,host:port][/chroot]`` (the chroot must exist); ``base_path`` holds the
    claims; timeouts are in seconds; ``auth`` is ``(scheme, credential)`` pairs sent on connect (e.g.
    ``("digest", "user:password")``); ``acl`` is one of :data:`ACL_MODES`.
    """

    connect: str
    base_path: str = DEFAULT_BASE_PATH
    session_timeout: float = DEFAULT_SESSION_TIMEOUT_SECONDS
    connection_timeout: float = DEFAULT_CONNECTION_TIMEOUT_SECONDS
    auth: tuple[tuple[str, str], ...] = ()
    acl: str = "open"

    def __post_init__(self) -> None:
        if not isinstance(self.connect, str) or not self.connect.strip():
            raise ValueError(f"connect={self.connect!r}: expected host:port[,host:port][/chroot]")
        validate_path(self.base_path, "base_path")
        for key in ("session_timeout", "connection_timeout"):
            value = getattr(self, key)
            if not isinstance(value, int | float) or isinstance(value, bool) or not value > 0:
                raise ValueError(f"{key}={value!r}: expected a positive number of seconds")
        for pair in self.auth:
            if (
                not isinstance(pair, tuple)
                or len(pair) != 2
                or not all(isinstance(part, str) and part for part in pair)
            ):
                raise ValueError(f"auth entry {pair!r}: expected a (scheme, credential) pair of strings")
        if self.acl not in ACL_MODES:
            raise ValueError(f"acl={self.acl!r}: expected one of {', '.join(ACL_MODES)}")
        if self.acl == "creator" and not self.auth:
            raise ValueError("acl='creator' needs auth: nodes belong to the identity that authenticated")


class ZooKeeper:
    """The daemon's ZooKeeper session (one per process): claims, the table lock, the connection state."""

    def __init__(self, config: ZooKeeperConfig, identity: Mapping[str, object]) -> None:
        self.config = config
        self.identity: dict[str, object] = dict(identity)
        self._identity_json = json.dumps(self.identity, default=str)
        self._lock = threading.Lock()
        self._client: Any = None  # a KazooClient while started
        self._state: str = CLOSED
        self._epoch = 0
        self._listeners: list[Callable[[str], None]] = []
        self._claims: set[ZooKeeperClaim] = set()
        self._orphans: set[_Orphan] = set()
        self._events: queue.SimpleQueue[str] = queue.SimpleQueue()
        self._dispatcher: threading.Thread | None = None

    def __repr__(self) -> str:
        return f"ZooKeeper({self.config.connect!r}, {self.state})"

    # -- life cycle ----------------------------------------------------------------------------------------

    def start(self) -> None:
        """Connect, waiting up to ``connection_timeout``; ServiceError naming the connect string if not."""
        with self._lock:
            if self._client is not None:
                return
        connect = self.config.connect
        try:
            client = KazooClient(
                hosts=connect,
                timeout=self.config.session_timeout,
                default_acl=list(CREATOR_ALL_ACL if self.config.acl == "creator" else OPEN_ACL_UNSAFE),
                auth_data=list(self.config.auth) or None,
                connection_retry=dict(_CONNECTION_RETRY),
                command_retry=dict(_COMMAND_RETRY),
            )
        except (KazooException, ValueError) as e:
            raise ServiceError(f"cannot use ZooKeeper at {connect!r}: {e}") from e
        client.add_listener(lambda state: self._on_kazoo_state(client, state))
        self._dispatcher = threading.Thread(
            target=self._dispatch, name="hoodied-zookeeper-events", daemon=True
        )
        self._dispatcher.start()
        with self._lock:
            self._client = client
        timeout = self.config.connection_timeout
        problem: str | None = None
        try:
            client.start_async().wait(timeout)
            if not client.connected:
                problem = f"no connection within {timeout:g} s"
            elif client.chroot and not client.exists("/"):
                problem = f"its chroot {client.chroot!r} does not exist (create it first)"
        except Exception as e:
            problem = f"{type(e).__name__}: {e}"
        if problem is not None:
            self._shut_down(client)
            raise ServiceError(f"could not connect to ZooKeeper at {connect!r}: {problem}")
        logger.info("connected to ZooKeeper at %s (session 0x%x)", connect, client.client_id[0])

    def stop(self) -> None:
        """Close the session (its claims and lock nodes vanish with it); the state becomes CLOSED."""
        with self._lock:
            client = self._client
        if client is not None:
            self._shut_down(client)

    def _shut_down(self, client: Any) -> None:
        with self._lock:
            self._client = None  # from here on, the client's own state changes are not ours to report
        try:
            client.stop()
            client.close()
        except Exception:
            logger.warning("closing the ZooKeeper client failed", exc_info=True)
        self._note_state(CLOSED)
        self._events.put(_STOP_EVENT)
        dispatcher, self._dispatcher = self._dispatcher, None
        if dispatcher is not None and dispatcher is not threading.current_thread():
            dispatcher.join(timeout=10)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- state ---------------------------------------------------------------------------------------------

    @property
    def state(self) -> str:
        """``CONNECTED``, ``SUSPENDED``, ``LOST``, or ``CLOSED`` (before start, after stop)."""
        return self._state

    @property
    def connected(self) -> bool:
        return self._state == CONNECTED

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        """The session's id and password while connected."""
        with self._lock:
            client = self._client
        found = client.client_id if client is not None else None
        return (int(found[0]), bytes(found[1])) if found is not None else None

    def add_listener(self, fn: Callable[[str], None]) -> None:
        """Call ``fn(state)`` on every state change, on hoodied's ZooKeeper event thread (never kazoo's)."""
        with self._lock:
            self._listeners.append(fn)

    def remove_listener(self, fn: Callable[[str], None]) -> None:
        with self._lock:
            if fn in self._listeners:
                self._listeners.remove(fn)

    def _on_kazoo_state(self, client: Any, state: str) -> None:
        # kazoo's event thread: note the change and return at once.
        with self._lock:
            if client is not self._client:
                return
        self._note_state(str(state))

    def _note_state(self, state: str) -> None:
        with self._lock:
            if state == self._state:
                return
            self._state = state
            if state != CONNECTED:
                self._epoch += 1
        self._events.put(state)

    def _dispatch(self) -> None:
        while True:
            state = self._events.get()
            if state == _STOP_EVENT:
                return
            with self._lock:
                listeners = list(self._listeners)
                claims = list(self._claims) if state != CONNECTED else []
            for claim in claims:
                claim._mark_lost(f"the ZooKeeper session was {state}")
            if state == CLOSED:
                with self._lock:
                    self._claims.difference_update(claims)
            for fn in listeners:
                try:
                    fn(state)
                except Exception:
                    logger.exception("ZooKeeper state listener %r failed on %s", fn, state)
            if state == CONNECTED:
                self._clean_orphans()

    def _current(self) -> tuple[Any, str]:
        """The client (None when not started) and the state."""
        with self._lock:
            return self._client, self._state

    def _session(self) -> tuple[Any, int, int]:
        """The client, the epoch and the session id, when CONNECTED; ServiceError otherwise."""
        with self._lock:
            client, epoch, state = self._client, self._epoch, self._state
        found = client.client_id if client is not None else None
        if client is None or state != CONNECTED or found is None:
            raise ServiceError(f"ZooKeeper at {self.config.connect!r} is {state}, not CONNECTED")
        return client, epoch, int(found[0])

    def _epoch_now(self) -> int:
        with self._lock:
            return self._epoch

    # -- claims --------------------------------------------------------------------------------------------

    def claim_path(self, scope: str, name: str) -> str:
        return _join(
            self.config.base_path,
            CLAIMS_FOLDER,
            validate_segment(scope, "claim scope"),
            validate_segment(name, "claim name"),
        )

    def claim(self, scope: str, name: str) -> ZooKeeperClaim:
        """Take the claim ``scope``/``name`` now, or raise :class:`~hoodied.errors.ClaimHeld` naming its
        holder. Never waits for a holder; ServiceError when ZooKeeper cannot be asked."""
        path = self.claim_path(scope, name)
        client, epoch, session_id = self._session()
        token = uuid.uuid4().hex
        data = json.dumps(
            {**self.identity, "claimed_at_ms": int(time.time() * 1000), "token": token}, default=str
        ).encode("utf-8")
        try:
            client.retry(self._create_claim_node, client, path, data, token)
        except KazooException as e:
            self._forget(_Orphan(path, token))  # the create may have happened
            raise ServiceError(f"could not claim {path} in ZooKeeper: {type(e).__name__}: {e}") from e
        claim = ZooKeeperClaim(self, path, token, session_id, epoch)
        with self._lock:
            interrupted = self._epoch != epoch
            if not interrupted:
                self._claims.add(claim)
        if interrupted:
            self._forget(_Orphan(path, token))
            raise ServiceError(f"the ZooKeeper session was interrupted while claiming {path}; not claimed")
        return claim

    def _create_claim_node(self, client: Any, path: str, data: bytes, token: str) -> None:
        for _ in range(_CLAIM_ATTEMPTS):
            try:
                client.create(path, data, ephemeral=True, makepath=True)
                return
            except NodeExistsError:
                pass
            try:
                raw, _stat = client.get(path)
            except NoNodeError:
                continue  # released meanwhile: try again
            holder = _parse_holder(raw)
            if holder.get("token") == token:
                return  # our own create, whose answer was lost with a connection
            raise ClaimHeld(f"{path} is claimed by {_describe_holder(holder)}")
        raise ClaimHeld(f"could not claim {path}: it keeps changing hands")

    def holder(self, scope: str, name: str) -> dict[str, object] | None:
        """The data of the claim ``scope``/``name`` (identity, ``claimed_at_ms``, ``token``), or None."""
        path = self.claim_path(scope, name)
        client = self._session()[0]
        try:
            raw, _stat = client.retry(client.get, path)
        except NoNodeError:
            return None
        except KazooException as e:
            raise ServiceError(f"could not read {path} in ZooKeeper: {type(e).__name__}: {e}") from e
        return _parse_holder(raw)

    def claims(self, scope: str) -> dict[str, dict[str, object]]:
        """Every current claim of ``scope``: name -> holder data."""
        folder = _join(self.config.base_path, CLAIMS_FOLDER, validate_segment(scope, "claim scope"))
        client = self._session()[0]
        out: dict[str, dict[str, object]] = {}
        try:
            names = client.retry(client.get_children, folder)
        except NoNodeError:
            return out
        except KazooException as e:
            raise ServiceError(f"could not list {folder} in ZooKeeper: {type(e).__name__}: {e}") from e
        for name in sorted(names):
            try:
                raw, _stat = client.retry(client.get, _join(folder, name))
            except NoNodeError:
                continue
            except KazooException as e:
                raise ServiceError(f"could not read {folder}/{name}: {type(e).__name__}: {e}") from e
            out[str(name)] = _parse_holder(raw)
        return out

    # -- shared documents (the control plane) ------------------------------------------------------------

    def document_path(self, folder: str, name: str) -> str:
        return _join(
            self.config.base_path, validate_segment(folder, "folder"), validate_segment(name, "document")
        )

    def documents(self, folder: str) -> list[str]:
        """The names of the persistent documents under ``<base_path>/<folder>`` (none when it is absent)."""
        path = _join(self.config.base_path, validate_segment(folder, "folder"))
        client = self._session()[0]
        try:
            return sorted(str(n) for n in client.retry(client.get_children, path))
        except NoNodeError:
            return []
        except KazooException as e:
            raise ServiceError(f"could not list {path} in ZooKeeper: {type(e).__name__}: {e}") from e

    def read_document(self, folder: str, name: str) -> tuple[bytes, int] | None:
        """A document's bytes and version, or None when it does not exist."""
        path = self.document_path(folder, name)
        client = self._session()[0]
        try:
            raw, stat = client.retry(client.get, path)
        except NoNodeError:
            return None
        except KazooException as e:
            raise ServiceError(f"could not read {path} in ZooKeeper: {type(e).__name__}: {e}") from e
        return bytes(raw or b""), int(stat.version)

    def write_document(self, folder: str, name: str, data: bytes, version: int | None) -> bool:
        """Write a persistent document if it is still at ``version`` (``None``: if it does not exist yet);
        False when another writer got there first (read it again and retry)."""
        path = self.document_path(folder, name)
        client = self._session()[0]
        try:
            if version is None:
                client.retry(client.create, path, data, makepath=True)
            else:
                client.retry(client.set, path, data, version=version)
        except (NodeExistsError, BadVersionError, NoNodeError):
            return False
        except KazooException as e:
            raise ServiceError(f"could not write {path} in ZooKeeper: {type(e).__name__}: {e}") from e
        return True

    def _unregister(self, claim: ZooKeeperClaim) -> None:
        with self._lock:
            self._claims.discard(claim)

    # -- the table lock ------------------------------------------------------------------------------------

    def table_lock(
        self, path: str, *, acquire_timeout: float = DEFAULT_ACQUIRE_TIMEOUT_SECONDS
    ) -> ZooKeeperLock:
        """A new contender for the lock at ``path`` (Hudi's ``base_path/lock_key``), Curator-compatible."""
        return ZooKeeperLock(self, validate_path(path, "lock path"), acquire_timeout=acquire_timeout)

    # -- nodes of unknown fate -----------------------------------------------------------------------------

    def _forget(self, orphan: _Orphan) -> None:
        """Delete a node of ours now or, if ZooKeeper cannot be reached, once the connection is back."""
        with self._lock:
            self._orphans.add(orphan)
        if self.connected:
            self._clean_orphans()

    def _clean_orphans(self) -> None:
        with self._lock:
            client, orphans = self._client, list(self._orphans)
        if client is None:
            return
        for orphan in orphans:
            try:
                orphan.delete(client)
            except KazooException as e:
                logger.info("could not delete %s yet (%s); will retry on reconnection", orphan.path, e)
                continue
            with self._lock:
                self._orphans.discard(orphan)


@dataclass(frozen=True)
class _Orphan:
    """A node of ours to delete: a claim (only while it still holds ``token``), or the lock contender whose
    name starts with the last segment of ``path`` (kazoo's unique prefix: its sequence number may never
    have reached us)."""

    path: str
    token: str | None = None

    def delete(self, client: Any) -> None:
        """Delete it if it is there and ours; KazooException when ZooKeeper cannot be asked."""
        if self.token is not None:
            _delete_if_ours(client, self.path, self.token)
            return
        parent, _, prefix = self.path.rpartition("/")
        try:
            children = client.get_children(parent)
        except NoNodeError:
            return
        for child in children:
            if child.startswith(prefix):
                with contextlib.suppress(NoNodeError):
                    client.delete(f"{parent}/{child}")


def _delete_if_ours(client: Any, path: str, token: str) -> bool:
    """Delete ``path`` when it holds claim ``token`` (a version-checked delete). False when it was gone or
    not ours; KazooException when ZooKeeper cannot be asked."""
    try:
        raw, stat = client.get(path)
        if _parse_holder(raw).get("token") != token:
            return False
        client.delete(path, version=stat.version)
        return True
    except (NoNodeError, BadVersionError):
        return False


class ZooKeeperClaim:
    """A claim held as an ephemeral node (see :meth:`ZooKeeper.claim`); a :class:`~hoodied.claims.Claim`.

    Lost, for good, once the session is SUSPENDED or LOST (or the client stopped) after the claim was taken.
    """

    def __init__(self, zookeeper: ZooKeeper, path: str, token: str, session_id: int, epoch: int) -> None:
        self._zk = zookeeper
        self._path = path
        self._token = token
        self._session_id = session_id
        self._epoch = epoch
        self._guard = threading.Lock()
        self._lost_reason: str | None = None
        self._released = False
        self._callbacks: list[Callable[[], None]] = []

    def __repr__(self) -> str:
        return f"ZooKeeperClaim({self._path!r}, {'lost' if self.lost else 'held'})"

    @property
    def path(self) -> str:
        return self._path

    @property
    def token(self) -> str:
        return self._token

    @property
    def lost(self) -> bool:
        """True once the session was interrupted (SUSPENDED, LOST, CLOSED) after the claim was taken."""
        return self._lost_reason is not None or self._zk._epoch_now() != self._epoch

    def check(self) -> None:
        """Raise :class:`~hoodied.errors.ClaimLost` unless the claim is certainly still ours."""
        if self._released:
            raise ClaimLost(f"the claim {self._path} was released")
        if self.lost:
            raise ClaimLost(
                f"the claim {self._path} was lost: {self._lost_reason or 'the session was interrupted'}"
            )
        client, state = self._zk._current()
        if client is None or state != CONNECTED:
            raise ClaimLost(f"cannot confirm the claim {self._path}: ZooKeeper is {state}")
        try:
            raw, stat = client.get(self._path)
        except NoNodeError:
            raise ClaimLost(f"the claim {self._path} is gone") from None
        except KazooException as e:
            raise ClaimLost(f"cannot confirm the claim {self._path}: {type(e).__name__}: {e}") from e
        holder = _parse_holder(raw)
        if stat.ephemeralOwner != self._session_id or holder.get("token") != self._token:
            raise ClaimLost(f"the claim {self._path} is no longer ours: held by {_describe_holder(holder)}")
        if self.lost:
            raise ClaimLost(f"the claim {self._path} was lost while being checked")

    def release(self) -> None:
        """Delete the node if it is still ours; errors are logged (the node dies with the session anyway,
        and is deleted on reconnection if the session survives). Idempotent."""
        with self._guard:
            if self._released:
                return
            self._released = True
            self._callbacks.clear()
        self._zk._unregister(self)
        client = self._zk._current()[0]
        if client is None:
            return
        try:
            if not _delete_if_ours(client, self._path, self._token):
                logger.info("claim %s was already gone or taken over when released", self._path)
        except KazooException as e:
            logger.warning("could not delete the claim %s (%s); retrying on reconnection", self._path, e)
            self._zk._forget(_Orphan(self._path, self._token))

    def describe(self) -> str:
        return f"ZooKeeper claim {self._path} (session 0x{self._session_id:x})"

    def on_lost(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` once when the claim is lost (on hoodied's ZooKeeper event thread), or now if it
        already is. Not run after a release."""
        with self._guard:
            if self._released:
                return
            run_now = self.lost
            if not run_now:
                self._callbacks.append(callback)
        if run_now:
            callback()

    def _mark_lost(self, reason: str) -> None:
        with self._guard:
            if self._lost_reason is None:
                self._lost_reason = reason
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            try:
                callback()
            except Exception:
                logger.exception("on_lost callback of %s failed", self._path)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class _CuratorCompatibleLock(Lock):  # type: ignore[misc]
    """kazoo's lock recipe with contender names Curator's ``InterProcessMutex`` orders correctly."""

    _NODE_NAME = CURATOR_LOCK_MARK


class ZooKeeperLock(AcquireOnEnter):
    """The table lock in ZooKeeper, excluding and excluded by Curator's ``InterProcessMutex`` at the same
    path (Hudi's ``ZookeeperBasedLockProvider``); a :class:`~hoodie.lock.LockProvider`.

    One object is one holder: not re-entrant, not shared between threads. ``is_held`` turns False when the
    session is SUSPENDED or LOST after acquiring (kazoo's own ``is_acquired`` may still read True), and
    releasing then raises :class:`~hoodie.errors.LockLost`.
    """

    def __init__(
        self, zookeeper: ZooKeeper, path: str, *, acquire_timeout: float = DEFAULT_ACQUIRE_TIMEOUT_SECONDS
    ) -> None:
        self._zk = zookeeper
        self._path = path
        self._acquire_timeout = float(acquire_timeout)
        self._recipe: Any = None  # the kazoo lock while held
        self._epoch = -1

    def __repr__(self) -> str:
        return f"ZooKeeperLock({self._path!r}, {'held' if self._recipe is not None else 'free'})"

    @property
    def path(self) -> str:
        return self._path

    @property
    def node(self) -> str | None:
        """Our contender node's full path while held."""
        recipe = self._recipe
        return f"{self._path}/{recipe.node}" if recipe is not None and recipe.node else None

    @property
    def is_held(self) -> bool:
        recipe = self._recipe
        return recipe is not None and bool(recipe.is_acquired) and self._zk._epoch_now() == self._epoch

    def acquire(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds in total; :class:`~hoodie.errors.LockTimeout` (naming the holder)
        if the lock stays taken. Our contender node is removed whenever we do not end up holding the lock."""
        if self._recipe is not None:
            if not self.is_held:  # a block under it asks again after the session was interrupted
                raise LockLost(
                    f"{self!r} was lost while held (the ZooKeeper session was interrupted): work under it "
                    "may have raced, and must stop"
                )
            raise LockError(f"{self!r} is already held by this object; it is not re-entrant")
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            client, epoch, _session = self._session_for_lock()
            recipe = _CuratorCompatibleLock(
                client, self._path, self._zk._identity_json, extra_lock_patterns=(CURATOR_LOCK_MARK,)
            )
            remaining = deadline - time.monotonic()
            # kazoo's timeout bounds each wait for a predecessor, not the total: cancel at our deadline
            timer = threading.Timer(max(0.0, remaining), recipe.cancel)
            timer.daemon = True
            if remaining > 0:
                timer.start()
            try:
                gotten = (
                    recipe.acquire(blocking=True, timeout=remaining)
                    if remaining > 0
                    else recipe.acquire(blocking=False)  # a try-lock
                )
            except (KazooLockTimeout, CancelledError):
                gotten = False
            except KazooException as e:
                self._abandon(recipe)
                raise LockError(f"could not take the table lock {self._path}: {type(e).__name__}: {e}") from e
            finally:
                timer.cancel()
            if gotten and self._zk._epoch_now() == epoch:
                self._recipe, self._epoch = recipe, epoch
                return
            self._abandon(recipe)
            if time.monotonic() >= deadline:
                raise LockTimeout(
                    f"could not take the table lock {self._path} within {timeout:g} s: "
                    f"held by {self._holder_of(client)}"
                )
            # acquired across a session interruption: not trustworthy; contend again with what time is left

    def _session_for_lock(self) -> tuple[Any, int, int]:
        try:
            return self._zk._session()
        except ServiceError as e:
            raise LockError(f"cannot take the table lock {self._path}: {e}") from e

    def _holder_of(self, client: Any) -> str:
        try:
            contenders = _CuratorCompatibleLock(
                client, self._path, extra_lock_patterns=(CURATOR_LOCK_MARK,)
            ).contenders()
        except (KazooException, UnicodeDecodeError):
            return "(unknown)"
        return str(contenders[0]) if contenders else "(nobody now)"

    def _abandon(self, recipe: Any) -> None:
        """Remove our contender node, whatever kazoo's own clean-up managed (found by kazoo's unique prefix:
        a create whose answer was lost leaves a node kazoo never learnt the name of)."""
        recipe.is_acquired = False
        self._zk._forget(_Orphan(f"{self._path}/{recipe.prefix}"))

    def release(self) -> None:
        recipe = self._recipe
        if recipe is None:
            raise LockError(f"{self!r} is not held by this object")
        lost = not self.is_held
        self._recipe, self._epoch = None, -1
        self._abandon(recipe)
        if lost:
            raise LockLost(
                f"the ZooKeeper session was interrupted while holding the table lock {self._path}: "
                "work done under it may have raced"
            )


__all__ = [
    "ACL_MODES",
    "CLOSED",
    "CONNECTED",
    "LOST",
    "SUSPENDED",
    "ZooKeeper",
    "ZooKeeperClaim",
    "ZooKeeperConfig",
    "ZooKeeperLock",
    "validate_path",
    "validate_segment",
]
