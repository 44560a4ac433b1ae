"""Golden digests: what the reference decided, per scenario, so CI need not run it again.

A *manifest* ``golden/<profile>.json`` holds, for every seed of a profile, the body digest
of the reference's trace (the same sha256 :class:`~tracediff.trace.BodyDigest` defines and
the runner reports as ``ImplStats.digest``) with its plan, record and byte counts. Checking
an implementation against it runs that implementation alone and compares digests: half the
work of a lockstep run against the reference, and a change of the reference itself shows up
as a mismatch of the reference against its own manifest. A handful of small scenarios also
keep their full trace (``golden/traces/<profile>-<seed>.trace``), for inspection with
``tracediff show`` and ``replay``, and so that a mismatch of the reference itself can be
located in them.

Manifest format, version 1 (JSON, one scenario per line so that a review diff is readable)::

    {"format": "tracediff-golden", "version": 1, "profile": "quick", "impl": "reference",
     "tracediff": "0.1.0", "traces": [3, 40],
     "scenarios": [{"seed": 0, "digest": "<sha256 hex>", "plans": 21, "records": 50,
                    "bytes": 23145, "scenario": "<16 hex>"}, ...]}

``records`` counts the compared frames, header included (as ``ImplStats.records``);
``bytes`` is the size of the compared payloads (header and records, without framing);
``scenario`` is the start of the sha256 of the header payload, so that a check can tell a
changed scenario (profile, generator or scenario defaults) from changed decisions.

Changing the golden files is a reviewed, two-step operation: ``update`` writes *pending*
files next to them (``<profile>.json.new``, ``traces/<profile>-<seed>.trace.new``) and never
overwrites an accepted file; ``review`` lists what changed (seeds added, removed, digests
changed); ``accept`` moves the pending files into place and ``reject`` deletes them. With
``CI=true`` in the environment nothing under the golden directory is written: pending files
go to the artifacts directory, and ``accept`` refuses.

The package: :mod:`~tracediff.golden.manifest` (the format and its files),
:mod:`~tracediff.golden.digest` (one implementation alone, digested),
:mod:`~tracediff.golden.check` (``golden check`` and the gate's step) and
:mod:`~tracediff.golden.update` (``update``, ``review``, ``accept``, ``reject``). The names
below are its public face.
"""

from tracediff.golden.check import (
    GoldenMismatch,
    GoldenOutcome,
    check,
    explain_reference_change,
    gate_step,
    missing_message,
    update_command,
)
from tracediff.golden.digest import Digested, deadline, digest_scenario, digest_scenarios
from tracediff.golden.manifest import (
    ARTIFACTS_ENV,
    DEFAULT_DIR,
    DIGEST,
    EXPLAIN_AT_MOST,
    FAILED,
    FORMAT,
    MISMATCH,
    MISSING,
    NOT_IN_MANIFEST,
    NOT_IN_PROFILE,
    OK,
    VERSION,
    Entry,
    Manifest,
    artifacts_dir,
    in_ci,
    manifest_path,
    parse_manifest,
    read_manifest,
    trace_path,
)
from tracediff.golden.update import (
    Change,
    Resolution,
    UpdateOutcome,
    accept,
    pending_dir,
    pending_profiles,
    reject,
    review,
    review_one,
    update,
)

__all__ = [
    "ARTIFACTS_ENV",
    "DEFAULT_DIR",
    "DIGEST",
    "EXPLAIN_AT_MOST",
    "FAILED",
    "FORMAT",
    "MISMATCH",
    "MISSING",
    "NOT_IN_MANIFEST",
    "NOT_IN_PROFILE",
    "OK",
    "VERSION",
    "Change",
    "Digested",
    "Entry",
    "GoldenMismatch",
    "GoldenOutcome",
    "Manifest",
    "Resolution",
    "UpdateOutcome",
    "accept",
    "artifacts_dir",
    "check",
    "deadline",
    "digest_scenario",
    "digest_scenarios",
    "explain_reference_change",
    "gate_step",
    "in_ci",
    "manifest_path",
    "missing_message",
    "parse_manifest",
    "pending_dir",
    "pending_profiles",
    "read_manifest",
    "reject",
    "review",
    "review_one",
    "trace_path",
    "update",
    "update_command",
]
