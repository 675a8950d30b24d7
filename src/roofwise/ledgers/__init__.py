"""What one call must do: tensors and work, fuse/separate, ledger YAML."""
