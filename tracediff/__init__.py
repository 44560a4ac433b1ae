"""tracediff: differential trace testing and replay for stateful decision engines.

A seeded scenario drives two (or more) implementations of a decision engine; every
decision is recorded into a canonical msgpack trace and the traces are compared byte
for byte. See README.md and docs/ for the workflows.
"""

__version__ = "0.1.0"
