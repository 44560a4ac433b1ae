"""Deliberately different implementations, loaded by tests through ``--impl module:attr``."""
