"""HBase HFiles (format version 3): the base files and log blocks of Hudi's metadata table.

:mod:`~hoodie.hfile.reader` reads them (trailer, file info, multi-level block index, checksummed GZ or
uncompressed blocks, KeyValues); :mod:`~hoodie.hfile.writer` writes them.
"""

from __future__ import annotations

from hoodie.hfile.block import KeyValue
from hoodie.hfile.reader import HFileReader
from hoodie.hfile.trailer import Compression, Trailer
from hoodie.hfile.writer import HFileWriter

__all__ = ["Compression", "HFileReader", "HFileWriter", "KeyValue", "Trailer"]
