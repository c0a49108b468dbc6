"""Write DALI-compatible index files for TFRecord, WebDataset tar and MXNet RecordIO files,
checking the framing of every record on the way (TFRecord data CRCs are checked when records
are read).

    raypipe index tfrecord train-00000.tfrecord train-00001.tfrecord   # -> FILE.idx
    raypipe index webdataset shard-000.tar                             # -> shard-000.tar.idx
    raypipe index mxnet train.rec                                      # -> train.idx
    raypipe index tfrecord data.tfrecord --out /indexes/data.idx       # one file only"""

from __future__ import annotations

import argparse

from tqdm import tqdm

from ..errors import UsageError
from .registry import INDEXED, get

HELP = "write DALI index files for TFRecord, WebDataset and MXNet RecordIO files"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``raypipe index``."""
    parser.add_argument("format", choices=sorted(INDEXED), help="the data files' format")
    parser.add_argument("files", nargs="+", metavar="FILE", help="data files to index")
    parser.add_argument("--out", metavar="PATH", help="the index path (with a single FILE only)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    """Index every file; print one line per file."""
    if args.out and len(args.files) != 1:
        raise UsageError("--out names one index: give a single FILE with it")
    fmt = get(INDEXED[args.format])
    for path in tqdm(args.files, unit="file", desc="index", disable=args.quiet or len(args.files) < 2):
        index_path = args.out or fmt.index_path(path)
        count = fmt.write_index(path, index_path)
        tqdm.write(f"{path}: {count} records -> {index_path}")
    return 0
