"""Convert a folder of class folders (or a list file of ``path label`` lines) into a container
that raypipe's and DALI's readers read.

    raypipe convert /data/train /data/train-tfrecord --format tfrecord
    raypipe convert /data/train /data/train-lmdb --format caffe
    raypipe convert list.txt /data/out --format webdataset --shard-size 2048 --workers 8

Sharded formats get files named ``shard-00000-of-00042.<suffix>`` with their DALI index next to
them; Caffe and Caffe2 get one LMDB in DST. Samples are keyed ``00000042_class/file`` in source
order, labels are class folder indices in sorted order (``classes.txt`` lists them). Re-running
the same command after an interruption skips what is done."""

from __future__ import annotations

import argparse
import json
import os

from tqdm import tqdm

from ..errors import UsageError
from ..formats.registry import FORMATS, get
from .plan import list_source
from .run import check_destination, convert

HELP = "convert a JPEG folder tree or file list into TFRecord, WebDataset, RecordIO, Caffe or Caffe2 LMDB"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``raypipe convert``."""
    parser.add_argument("src", metavar="SRC", help="a folder of class folders, or a list file of 'path label' lines")
    parser.add_argument("dst", metavar="DST", help="the output folder")
    parser.add_argument("--format", required=True, choices=sorted(FORMATS), help="the container format")
    parser.add_argument(
        "--shard-size",
        type=int,
        default=1024,
        metavar="N",
        help="samples per shard (sharded formats) or per transaction (LMDB); default 1024",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count() or 1,
        metavar="N",
        help="processes writing shards (threads reading files for LMDB); default: the CPU count",
    )
    parser.add_argument(
        "--shuffle",
        action="store_true",
        help="write the samples in a shuffled order, not as listed: a reader's own random_shuffle mixes a "
        "container's records only within its initial_fill buffer",
    )
    parser.add_argument(
        "--shuffle-seed", type=int, default=0, metavar="N", help="the seed of --shuffle's order; default 0"
    )
    parser.add_argument("--json", metavar="PATH", help="also write the summary as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    """Check the options, convert, print the summary."""
    if args.shard_size < 1:
        raise UsageError(f"--shard-size must be positive, got {args.shard_size}")
    if args.workers < 1:
        raise UsageError(f"--workers must be positive, got {args.workers}")
    fmt = get(args.format)
    if args.shuffle_seed < 0:
        raise UsageError(f"--shuffle-seed must be a non-negative int, got {args.shuffle_seed}")
    source = list_source(args.src, shuffle_seed=args.shuffle_seed if args.shuffle else None)
    check_destination(args.dst, fmt, source, args.shard_size)
    with tqdm(total=len(source.samples), unit="img", desc=f"convert to {fmt.name}", disable=args.quiet) as bar:
        summary = convert(source, args.dst, fmt, part_size=args.shard_size, workers=args.workers, progress=bar.update)
    if summary.bytes_written:
        rate = f"{summary.bytes_written / 1e6 / max(summary.seconds, 1e-9):.0f} MB/s written"
    else:
        rate = "nothing left to write"
    print(
        f"{summary.samples} samples, {summary.bytes / 1e6:.1f} MB, {summary.classes} classes -> {summary.dst} "
        f"({fmt.name}: {summary.parts} {'shards' if fmt.sharded else 'transactions'}, "
        f"{summary.parts_skipped} already done; {summary.seconds:.1f} s, {rate})"
    )
    print(
        f"read it inside a pipeline with fn.readers.{fmt.reader}, its shards and indexes chosen for you:\n"
        f"    from raypipe.formats.registry import read_converted\n"
        f"    jpegs, labels = read_converted({summary.dst!r})\n"
        f"or give it to the ResNet-50 preset as its file_root: presets.resnet50_train({summary.dst!r})"
    )
    if not args.shuffle and summary.classes > 1:
        print(
            "its records follow the source's order, class after class: rp.serve's shuffles mix them all, a "
            "reader's own random_shuffle only within its initial_fill buffer (convert with --shuffle for that)"
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(summary.as_dict(), f, indent=2)
    return 0
