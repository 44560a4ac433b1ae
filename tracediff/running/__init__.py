"""Running implementations: the one place that calls user code, the recording and lockstep
primitives, the runner, its journal and fingerprints, and the determinism self-check."""
