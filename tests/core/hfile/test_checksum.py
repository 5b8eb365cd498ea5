"""HFile block checksums: CRC32C against known values, its numpy path against the plain loop."""

from __future__ import annotations

import os

from hoodie.hfile.checksum import _crc32c_loop, crc32c


def test_crc32c_known_values() -> None:
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(b"") == 0
    assert crc32c(bytes(32)) == 0x8A9136AA
    long = os.urandom(40_000)
    assert crc32c(long) == crc32c(bytes(long))  # the numpy path and the loop path agree below
    assert crc32c(long) == _crc32c_loop(long)
