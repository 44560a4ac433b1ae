"""The kvbatch model's own commands (KVBatchModel.commands)."""
