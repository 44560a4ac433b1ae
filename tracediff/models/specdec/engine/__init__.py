"""Engines that execute plans (the deterministic simulator) and the worker loop."""
