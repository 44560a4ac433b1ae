"""The scheduler model: shared state and pure formulas, the reference and the optimized."""
