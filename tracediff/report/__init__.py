"""Presenters: they read what the core produced and render it; they never decide anything."""
