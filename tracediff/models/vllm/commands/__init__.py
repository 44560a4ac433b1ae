"""The vllm model's own commands."""
