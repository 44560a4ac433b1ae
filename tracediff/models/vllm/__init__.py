"""vLLM's own scheduler as a tracediff model (docs/vllm.md)."""
