"""The shards of a dataset: a records file, a folder of shards, or a glob, on local disk or
behind an fsspec URL (`s3://bucket/history/`, `gs://.../*.parquet`, `file:///data/runs/`).

A local path is listed as `roofwise analyze` lists it (`records.read.record_files`), so both
name the same shards in the same order and say a bad record by the same file and row. A URL is
listed by its fsspec filesystem; each worker fetches a remote shard whole before reading it.
"""

from __future__ import annotations

import glob
from dataclasses import dataclass
from pathlib import Path

from roofwise.base.errors import InputError
from roofwise.base.text import elide
from roofwise.records.read import format_of, record_files

_MAGIC = ("*", "?", "[")


@dataclass(frozen=True)
class Shard:
    """One file of a dataset: its name as said in messages (as analyze says it), where a
    worker finds it (an absolute path, or the URL), and whether that is a URL."""
    name: str
    location: str
    remote: bool = False


def is_url(path: str) -> bool:
    return "://" in path


def dataset_shards(path: str) -> list[Shard]:
    """The dataset's shards in name order; InputError when there are none or the path is not
    there."""
    if not is_url(path):
        if any(c in path for c in _MAGIC):
            found = sorted(p for p in glob.glob(path) if Path(p).is_file() and _is_shard(p))
            if not found:
                raise InputError(path, "matches no record files; expected a glob of *.jsonl, "
                                       "*.csv or *.parquet shards")
            return [Shard(p, str(Path(p).resolve())) for p in found]
        if not Path(path).exists():
            raise InputError(path, "no such file or folder; expected a records file or a "
                                   "folder of shards")
        return [Shard(str(p), str(p.resolve())) for p in record_files(path)]
    return [Shard(url, url, remote=True) for url in _remote_shards(path)]


def _remote_shards(url: str) -> list[str]:
    fsspec = _fsspec(url)
    try:
        fs, root = fsspec.core.url_to_fs(url)
        if any(c in root for c in _MAGIC):
            names = fs.glob(root)
        elif fs.isdir(root):
            names = fs.find(root, maxdepth=1)
        elif fs.isfile(root):
            names = [root]
        else:
            raise InputError(url, "no such file or folder; expected a records file or a "
                                  "folder of shards")
    except (OSError, ValueError, ImportError) as exc:  # a bad scheme, no credentials, refused
        raise InputError(url, f"cannot list ({said(exc)})") from None
    found = sorted(n for n in names if _is_shard(n))
    if not found:
        raise InputError(url, "holds no record files; expected *.jsonl, *.csv or *.parquet "
                              "shards")
    return [fs.unstrip_protocol(n) for n in found]


def _is_shard(name: str) -> bool:
    try:
        format_of(name)
    except InputError:
        return False
    return not Path(name).name.startswith(".")


def _fsspec(url: str):  # type: ignore[no-untyped-def]
    try:
        import fsspec
    except ImportError:
        raise InputError(url, "a URL needs fsspec: pip install 'roofwise[fleet]'") from None
    return fsspec


def said(exc: BaseException) -> str:
    """An exception from a library (fsspec, Dask) as a short phrase for one error line."""
    return elide(" ".join(str(exc).split()) or type(exc).__name__, 200)
