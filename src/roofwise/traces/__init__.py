"""PyTorch profiler traces in: read (`reader`), link kernels to the ops that launched them
(`link`), price each op from its recorded shapes (`aten`, `replay`), build records (`build`),
judge and group them (`analysis`)."""

from .analysis import Group, TraceAnalysis, analyze_trace, groups
from .reader import is_trace, read_trace

__all__ = ["Group", "TraceAnalysis", "analyze_trace", "groups", "is_trace", "read_trace"]
