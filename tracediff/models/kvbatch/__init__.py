"""The kvbatch model: continuous batching with a paged KV cache (docs/kvbatch.md)."""
