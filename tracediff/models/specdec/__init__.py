"""The speculative-decoding request scheduler: tracediff's first decision model."""
