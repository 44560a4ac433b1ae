"""Imported by the local executor's fork server when the vllm model is in effect (the
model's ``worker_modules``): vLLM's import (about 15 s) and a warm-up, once for every worker
it forks, instead of once in each worker. Importing it elsewhere costs the same."""

from __future__ import annotations

from tracediff.models.vllm import adapter

adapter.preload()
