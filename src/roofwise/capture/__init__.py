"""Ledgers captured from PyTorch functions on meta and fake tensors."""
