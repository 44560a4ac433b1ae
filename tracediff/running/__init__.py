"""Running implementations: the recording primitive (``record``), the runner's lockstep
comparison, its journal and fingerprints, the explanations and state diffs that re-drive
implementations, and the determinism self-check. User code itself is called through
:mod:`tracediff.executor.call`, below every part that runs it."""
