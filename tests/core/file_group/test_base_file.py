from __future__ import annotations

import pytest

from hoodie.errors import InvalidFileName
from hoodie.file_group.base_file import BaseFile


def test_parse_and_print_back() -> None:
    name = "036ded81-58b2-4f8c-9e1c-9f1e0c3c5a4d-0_1-1112-3191_20251220210129235.parquet"
    bf = BaseFile.parse(name)
    assert bf.file_id == "036ded81-58b2-4f8c-9e1c-9f1e0c3c5a4d-0"
    assert bf.write_token == "1-1112-3191"
    assert bf.instant_time == "20251220210129235"
    assert bf.file_name == name
    assert BaseFile.parse("files-0000-0_0-5-4_00000000000000000.hfile").file_id == "files-0000-0"


@pytest.mark.parametrize(
    "name", [".hoodie_partition_metadata", "x.parquet", ".abc_1-0-1_20240101000000000.parquet"]
)
def test_rejects_other_names(name: str) -> None:
    with pytest.raises(InvalidFileName):
        BaseFile.parse(name)
