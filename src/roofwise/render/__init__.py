"""Renderings of verdicts: terminal tables, charts, HTML. They compute nothing of their own."""
