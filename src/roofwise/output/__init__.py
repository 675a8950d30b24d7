"""The verdict frame and what is written from it (JSON lines, CSV)."""
