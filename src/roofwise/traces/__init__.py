"""PyTorch profiler traces in: read (`reader`), link kernels to the ops that launched them
(`link`), price each op from its recorded shapes (`aten`, `replay`), build records (`build`),
judge and group them (`analysis`)."""

# Submodules are imported where used (`from roofwise.traces.reader import is_trace`), so that
# telling a trace from a records file costs no import of the trace pricing.
