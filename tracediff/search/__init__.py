"""Searching scenario space: shrinking a failing scenario and fuzzing for new ones."""
