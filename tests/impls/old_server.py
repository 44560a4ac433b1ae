"""A served implementation that speaks protocol version 1 only, as an implementation
written before version 2 does: ``python tests/impls/old_server.py NAME``."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tracediff.models.specdec import serve  # noqa: E402

if __name__ == "__main__":
    serve.PROTOCOL_VERSIONS = (1,)  # type: ignore[misc]
    sys.exit(serve.main())
