"""One poller per table across replicas: each table's listing and scheduling belongs to one live replica.

Without a split every replica listed every table at every poll, so each replica added multiplied a fleet's
requests instead of sharing them. Here each replica is a member (a ZooKeeper claim in the ``_replicas``
scope: an ephemeral node, gone with its session), and a table belongs to the member that ranks first for
it by rendezvous hashing (:func:`owner_of`: the highest hash of member and table key). Every replica
computes the same owner from the same member list, with no coordination beyond the list; a member that
joins or leaves moves only the tables it gains or had (about one in N), and a replica that dies hands its
tables over when its session ends (the session timeout) and the others' next poll reads the list.

Correctness never depends on the split, only cost does: claims and the table lock stay as they are, so two
replicas that briefly both take a table for theirs (one has not read the new list yet) still run each
instant once, and a table nobody takes for a poll waits one poll more. A replica that cannot read the list
keeps its last one; one that never read it (or runs embedded, alone) owns every table.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable

from hoodied.claims import Claim
from hoodied.coordination import Coordination
from hoodied.errors import ClaimHeld

logger = logging.getLogger(__name__)


def _rank(member: str, key: str) -> int:
    return int.from_bytes(hashlib.blake2b(f"{member}\n{key}".encode(), digest_size=8).digest(), "big")


def owner_of(key: str, members: Iterable[str]) -> str | None:
    """The member that owns the table ``key``: the highest rendezvous rank (ties by name), ``None`` for no
    members."""
    return max(members, key=lambda m: (_rank(m, key), m), default=None)


class TableSplit:
    """This replica's share of the tables (module doc); :meth:`refresh` once per poll, then :meth:`owns`."""

    def __init__(self, replica: str, coordination: Coordination) -> None:
        self.replica = replica
        self._coordination = coordination
        self._membership: Claim | None = None
        self._said: str | None = None
        #: The live members as last read (this replica always among them); ``None``: no split, every table
        #: is this replica's.
        self.members: tuple[str, ...] | None = None

    def refresh(self) -> bool:
        """Keep this replica a member (again, after a lost session) and read the members; returns whether
        the list changed."""
        if self._coordination.zookeeper_state is None:  # embedded: one replica, every table
            return False
        if self._membership is None or getattr(self._membership, "lost", False):
            try:
                self._membership = self._coordination.claim_member(self.replica)
            except ClaimHeld as e:
                self._say(f"another replica is named {self.replica!r} ({e}): names must be unique")
            except Exception as e:  # ZooKeeper away: the last list stands, claims still guard the work
                self._say(f"cannot join the replicas' list: {type(e).__name__}: {e}")
        try:
            found = self._coordination.members()
        except Exception as e:
            self._say(f"cannot read the replicas' list (keeping the last one): {type(e).__name__}: {e}")
            return False
        members = tuple(sorted({*found, self.replica}))
        changed = members != self.members
        if changed:
            logger.info("replicas sharing the tables: %s", ", ".join(members))
        self.members = members
        return changed

    def owns(self, key: str) -> bool:
        """Whether this replica lists and schedules the table ``key``."""
        return self.owner(key) == self.replica

    def owner(self, key: str) -> str:
        """The replica that lists and schedules the table ``key`` (as this replica sees the list)."""
        return self.replica if self.members is None else owner_of(key, self.members) or self.replica

    def _say(self, message: str) -> None:
        if message != self._said:
            logger.warning("%s", message)
        self._said = message


__all__ = ["TableSplit", "owner_of"]
