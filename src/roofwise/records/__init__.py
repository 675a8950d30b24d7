"""Benchmark records: reading (contract, screen, batches) and writing."""
