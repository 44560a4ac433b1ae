"""Atomic writes: after any interruption a kept file is the old one or the new one, whole."""

from __future__ import annotations

import hashlib
import os
import random
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tracediff.atomic import (
    atomic_writer,
    check_target,
    ensure_directory,
    write_bytes_atomic,
    write_text_atomic,
)
from tracediff.errors import OutputError
from tracediff.trace import TraceReader, encode

CHUNKS = 64
CHUNK_BYTES = 256 * 1024  # 16 MiB in all: long enough to be caught in the middle

# The writer: prints one byte after each chunk (so the test knows how far it got), and "D"
# once the file is in place. Kind "raw" goes through atomic_writer, "trace" through
# TraceWriter (which writes through atomic_writer, frame by frame).
WRITER = """
import sys
from tracediff.atomic import atomic_writer
from tracediff.trace import TraceWriter, encode

kind, path, chunks, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
out = sys.stdout
if kind == "raw":
    with atomic_writer(path) as handle:
        for i in range(chunks):
            handle.write(bytes([i % 251]) * size)
            handle.flush()
            out.write("."); out.flush()
else:
    with TraceWriter(path, {"format": "tracediff-trace", "version": 1}) as writer:
        for i in range(chunks):
            writer.write_record(encode({"t": "plan", "plan": i, "pad": b"x" * size}))
            out.write("."); out.flush()
out.write("D"); out.flush()
"""


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def expected_raw() -> str:
    h = hashlib.sha256()
    for i in range(CHUNKS):
        h.update(bytes([i % 251]) * CHUNK_BYTES)
    return h.hexdigest()


def kill_writer_after(
    kind: str, path: Path, chunks_written: int, env: dict[str, str], python: str
) -> bool:
    """Run the writer, SIGKILL it once it reports ``chunks_written`` chunks (or let it
    finish when that is past the end); returns whether it finished."""
    with subprocess.Popen(
        [python, "-c", WRITER, kind, str(path), str(CHUNKS), str(CHUNK_BYTES)],
        env=env,
        stdout=subprocess.PIPE,
    ) as process:
        assert process.stdout is not None
        seen = b""
        while len(seen) < chunks_written:
            byte = process.stdout.read(1)
            if not byte:
                break
            seen += byte
        if b"D" not in seen:
            process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    return process.returncode == 0


@pytest.mark.parametrize("kind", ["raw", "trace"])
def test_sigkill_mid_write_leaves_the_old_file_or_the_new_one(
    tmp_path: Path, kind: str, subprocess_env: dict[str, str], python: str
) -> None:
    target = tmp_path / f"kept.{kind}"
    target.write_bytes(b"the old content\n")
    old = digest(target)
    rng = random.Random(f"atomic-{kind}")
    # random kill points, plus one at the very start and one after the end
    points = [0, *sorted(rng.randrange(1, CHUNKS) for _ in range(2)), CHUNKS + 1]
    new: str | None = None
    for point in points:
        finished = kill_writer_after(kind, target, point, subprocess_env, python)
        now = digest(target)
        if finished:
            new = now
            if kind == "raw":
                assert now == expected_raw()
            else:
                assert TraceReader(target).verify() is not None  # whole and valid
            target.write_bytes(b"the old content\n")  # back to the old one for the next
        else:
            assert now == old, f"killed after {point} chunks, the file is neither old nor new"
            if point:  # it really was caught mid-write: its temporary file is still there
                assert any(tmp_path.glob(f".{target.name}.*.tmp"))
    assert new is not None  # the run past the end did finish
    # Leftovers are only the writer's own temporary files, which nothing reads.
    leftovers = {p.name for p in tmp_path.iterdir()} - {target.name}
    assert all(name.startswith(f".{target.name}.") and name.endswith(".tmp") for name in leftovers)


def test_an_exception_inside_the_writer_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "summary.json"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_writer(target) as handle:
        handle.write(b"half")
        raise RuntimeError("boom")
    assert target.read_text() == "old"
    assert list(tmp_path.iterdir()) == [target]  # the temporary file is gone too


def test_new_files_follow_the_umask_and_replacements_keep_their_mode(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh.json"
    old_mask = os.umask(0o027)
    try:
        write_text_atomic(fresh, "{}")
    finally:
        os.umask(old_mask)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o640  # not mkstemp's 0o600
    kept = tmp_path / "kept.json"
    kept.write_text("old")
    kept.chmod(0o604)
    write_bytes_atomic(kept, b"new")
    assert kept.read_bytes() == b"new"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o604


def test_trace_writer_output_is_a_valid_trace(tmp_path: Path) -> None:
    from tracediff.trace import TraceWriter

    path = tmp_path / "t.trace"
    with TraceWriter(path, {"format": "tracediff-trace", "version": 1}) as writer:
        writer.write_record(encode({"t": "plan", "plan": 1}))
    assert [record["plan"] for record in TraceReader(path).decoded_records()] == [1]


def test_check_target_refuses_what_cannot_be_written(tmp_path: Path) -> None:
    check_target(tmp_path / "ok.json", "--json")  # fine, and leaves nothing behind
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(OutputError, match="is a directory"):
        check_target(tmp_path, "--json")
    with pytest.raises(OutputError, match="does not exist"):
        check_target(tmp_path / "missing" / "x.json", "--json")
    (tmp_path / "file").write_text("")
    with pytest.raises(OutputError, match="is not a directory"):
        check_target(tmp_path / "file" / "x.json", "--json")
    with pytest.raises(OutputError, match="is a file, not a directory"):
        ensure_directory(tmp_path / "file", "--artifacts")
    # only the last component is created: a typo in a parent grows no tree elsewhere
    with pytest.raises(OutputError, match="directory .*a does not exist; create it first"):
        ensure_directory(tmp_path / "a" / "b", "--artifacts")
    assert not (tmp_path / "a").exists()
    ensure_directory(tmp_path / "a", "--artifacts")
    assert (tmp_path / "a").is_dir()


@pytest.mark.skipif(
    sys.platform == "win32" or os.geteuid() == 0, reason="root writes into read-only dirs"
)
def test_check_target_refuses_a_read_only_directory(tmp_path: Path) -> None:
    read_only = tmp_path / "ro"
    read_only.mkdir()
    read_only.chmod(0o555)
    try:
        with pytest.raises(OutputError, match="cannot write in"):
            check_target(read_only / "x.json", "--json")
    finally:
        read_only.chmod(0o755)


@pytest.mark.skipif(not Path("/sys").is_dir(), reason="needs a file system that refuses files")
def test_check_target_refuses_a_directory_that_refuses_files_even_for_root() -> None:
    # sysfs refuses new files whoever asks: the probe finds out without guessing from modes
    with pytest.raises(OutputError, match="--json /sys/x.json: cannot write in /sys"):
        check_target("/sys/x.json", "--json")
