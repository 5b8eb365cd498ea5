"""``python -m hoodied.demo writer PATH ...``: the demo's writer child."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from hoodied.demo.writer import writer_main

if TYPE_CHECKING:
    pass

#: Relative to the table's base path: the demo's configuration, whose presence marks a table the demo made.


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m hoodied.demo writer PATH ...`` (the demo's writer child)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] != "writer":
        print("usage: python -m hoodied.demo writer PATH [options]   (the demo itself: hoodied demo)")
        return 2
    return writer_main(args[1:])


if __name__ == "__main__":
    sys.exit(main())
