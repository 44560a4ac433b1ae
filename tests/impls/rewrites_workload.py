"""The kvbatch reference, rewriting a workload file in place each time it is made (for each
scenario): the last digit of the second line of ``$TRACEDIFF_TEST_REWRITE`` (a CSV) changes,
the same size, other content, as an editor or a data pipeline could while a campaign runs
(tests/test_workload.py)."""

from __future__ import annotations

import os
from typing import Any

from tracediff.models.kvbatch.reference import Reference


class RewritesWorkload(Reference):
    def __init__(self, scenario: Any) -> None:
        super().__init__(scenario)
        path = os.environ["TRACEDIFF_TEST_REWRITE"]
        with open(path, "rb") as stream:
            data = bytearray(stream.read())
        at = data.index(b"\n", data.index(b"\n") + 1) - 1  # the second line's last digit
        data[at] = ord("1") if data[at] != ord("1") else ord("2")
        with open(path, "r+b") as stream:  # in place: the same inode, the same size
            stream.write(data)
