"""Headless Chromium for the tests of web pages: the binary, a run with its own profile, and a PNG's rows."""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest


def chromium_binary() -> str:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("no headless Chromium on PATH (Debian package chromium; `.ci/install --test` installs it)")


def run_chromium(binary: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [
        binary,
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
        *args,
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, f"{' '.join(command)} exited {result.returncode}:\n{result.stderr[-3000:]}"
    return result


def png_scanlines(data: bytes) -> tuple[int, int, list[bytes]]:
    """A non-interlaced 8-bit PNG's width, height and its scanlines as stored (each a filter type byte and
    the filtered pixel bytes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR"
    assert length == 13
    width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", data[16:29])
    assert depth == 8
    assert interlace == 0
    channels = {0: 1, 2: 3, 4: 2, 6: 4}[color]
    idat = []
    at = 8
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at : at + 8])
        if kind == b"IDAT":
            idat.append(data[at + 8 : at + 8 + length])
        at += 12 + length  # length, type, data, CRC
    pixels = zlib.decompress(b"".join(idat))
    stride = 1 + width * channels
    assert len(pixels) == stride * height
    return width, height, [pixels[r * stride : (r + 1) * stride] for r in range(height)]
