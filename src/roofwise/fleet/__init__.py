"""Judging a records dataset on a cluster (Dask): `judge_dataset`, and `roofwise fleet`.

A stage above `output`: each worker judges whole shards with the streaming `analyze` of
`output.stream`, and the client adds their answers up in dataset order (docs/fleet.md).
Dask is the `fleet` extra's; it is imported only when a dataset is judged.
"""

from roofwise.fleet.engine import FleetResult, judge_dataset

__all__ = ["FleetResult", "judge_dataset"]
