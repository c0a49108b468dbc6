"""Time the ResNet-50 training pipeline through several loaders on the same JPEG files in one
run: raypipe in one process (cpu/mixed decoder, float32/uint8), the raypipe service (1 and 2
ranks), NVIDIA DALI's CPU pipeline, a torch DataLoader, Ray Data, and a decode-only bound.
Rounds alternate (each contender once per round) and medians are reported.

    raypipe bench                                 # 1,000 generated JPEGs, batch 64, 2 threads, 3 rounds
    raypipe bench --quick                         # a smoke run: 64 images, batch 16, 2 rounds
    raypipe bench --data /data/train --images 4096 --threads 8 --json bench.json
    raypipe bench --only 'raypipe-cpu-*,dali-cpu' # --list shows the names
"""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import json
import math
import os
import sys

from raypipe.errors import ReaderError, UsageError
from raypipe.formats.registry import converted_format
from raypipe.operators.readers import list_file_root

from .contenders import Contender, contenders
from .dataset import cache_dir, prepare
from .report import format_report
from .suite import run_rounds, summarize

HELP = "time the ResNet-50 pipeline through raypipe, DALI, torch and Ray Data on the same files"
DEFAULTS = {"images": 1000, "batch_size": 64, "rounds": 3, "warmup": 15, "seconds": 5.0}
QUICK = {"images": 64, "batch_size": 16, "rounds": 2, "warmup": 1, "seconds": 0.0}


@dataclasses.dataclass(frozen=True)
class Options:
    """The checked options of one run."""

    data: str | None
    images: int
    batch_size: int
    threads: int
    rounds: int
    warmup: int
    seconds: float
    contenders: list[Contender]
    json_path: str | None
    quick: bool


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``raypipe bench``."""
    parser.add_argument(
        "--data",
        metavar="DIR",
        help=f"a folder of class folders of JPEGs (default: 1,000 generated JPEGs of 320-640 x 240-480, cached in "
        f"{cache_dir()})",
    )
    parser.add_argument(
        "--images",
        type=int,
        metavar="N",
        help="JPEGs per round (default 1000; --quick: 64); with --data: N of its files",
    )
    parser.add_argument("--batch-size", type=int, metavar="B", help="batch size (default 64; --quick: 16)")
    parser.add_argument("--threads", type=int, default=2, metavar="T", help="threads or workers per contender (2)")
    parser.add_argument("--rounds", type=int, metavar="R", help="alternating rounds (default 3; --quick: 2)")
    parser.add_argument(
        "--warmup",
        type=int,
        metavar="W",
        help="batches untimed after the first in each round, so contenders are timed in their steady state "
        "(default 15, an epoch of the default data; --quick: 1; the service rows always warm up for an epoch)",
    )
    parser.add_argument(
        "--seconds",
        type=float,
        metavar="S",
        help="time each contender over whole epochs until S seconds have passed (default 5; --quick: 0, one "
        "epoch): a window of one epoch, under a second here, mostly measures how fast a contender settles",
    )
    parser.add_argument("--only", metavar="NAME,...", help="run only these contenders (shell patterns: 'raypipe-*')")
    parser.add_argument("--skip", metavar="NAME,...", help="leave these contenders out")
    parser.add_argument("--quick", action="store_true", help="a smoke run, tiny sizes (its numbers mean little)")
    parser.add_argument("--json", metavar="PATH", help="also write every round's values and the summary here")
    parser.add_argument("--list", action="store_true", help="list the contenders and whether they can run, then stop")


def run(args: argparse.Namespace) -> int:
    """Check everything, then prepare the data, run the rounds and print the table. Exit status
    1 when a contender failed or none could run."""
    if args.list:
        for c in contenders(args.threads):
            print(f"{c.name:<18} {c.label:<48} {c.unavailable() or 'available'}")
        return 0
    options = check(args)
    selected = []
    skipped: dict[Contender, str] = {}
    for c in options.contenders:
        why = c.unavailable()
        if why is None:
            selected.append(c)
        else:
            skipped[c] = why
            print(f"note: skipping {c.name} ({c.label}): {why}", flush=True)
    if not selected:
        print("raypipe bench: no selected contender can run here", file=sys.stderr)
        return 1
    dataset = prepare(options.data, options.images)
    settings = {
        "batch_size": options.batch_size,
        "threads": options.threads,
        "rounds": options.rounds,
        "batches_per_epoch": len(dataset.paths) // options.batch_size,
        "warmup_batches": options.warmup,
        "timed_seconds": options.seconds,
        "quick": options.quick,
        "selected": [c.name for c in options.contenders],
    }
    records = run_rounds(
        selected, dataset, options.batch_size, options.threads, options.rounds, options.warmup, options.seconds
    )
    summary = summarize(records, skipped, dataset, settings)
    print(format_report(summary))
    if options.json_path:
        with open(options.json_path, "w") as f:
            json.dump(summary, f, indent=2)
            f.write("\n")
    return 1 if summary["failed"] else 0


def check(args: argparse.Namespace) -> Options:
    """The options, checked before anything starts (no data written, no Ray): a UsageError
    names the first problem."""
    sizes = {key: getattr(args, key) for key in DEFAULTS}
    explicit_images = sizes["images"] is not None
    for key, value in sizes.items():
        if value is None:
            sizes[key] = (QUICK if args.quick else DEFAULTS)[key]
    for key in ("warmup", "seconds"):
        if not 0 <= sizes[key] < math.inf:  # nor NaN
            raise UsageError(f"--{key} must be a finite number at least 0, got {sizes[key]}")
    for key, value in [*sizes.items(), ("threads", args.threads)]:
        if key not in ("warmup", "seconds") and value < 1:
            raise UsageError(f"--{key.replace('_', '-')} must be at least 1, got {value}")
    chosen = _select(contenders(args.threads), args.only, args.skip)
    if args.data is not None:
        if converted_format(args.data) is not None:
            raise UsageError(
                f"--data: {args.data} holds a conversion by raypipe convert; the contenders read JPEG files, "
                "so give the folder it was converted from (benchmarks/cpu_stage_cost.py --source and "
                "examples/bench_gpu.py --source time raypipe on containers)"
            )
        try:
            available = len(list_file_root(args.data)[0])
        except ReaderError as exc:
            raise UsageError(f"--data: {exc}") from None
        if explicit_images and sizes["images"] > available:
            raise UsageError(f"--images {sizes['images']}: {args.data} holds only {available} images")
        sizes["images"] = min(sizes["images"], available)
    ranks = max(1, *(c.ranks for c in chosen))
    least = 2 * sizes["batch_size"] * ranks
    if sizes["images"] < least:
        widest = [c.name for c in chosen if c.ranks == ranks]
        raise UsageError(
            f"{sizes['images']} images per round are too few for batch size {sizes['batch_size']}: every rank needs "
            f"a first batch and at least one timed batch, so at least {least} images"
            + (f" ({', '.join(widest)} has {ranks} ranks)" if ranks > 1 else "")
        )
    if args.json is not None:
        folder = os.path.dirname(os.path.abspath(args.json))
        if os.path.isdir(args.json) or not os.path.isdir(folder) or not os.access(folder, os.W_OK):
            raise UsageError(f"--json {args.json}: not a writable file path (is its folder there?)")
    return Options(args.data, threads=args.threads, contenders=chosen, json_path=args.json, quick=args.quick, **sizes)


def _select(every: list[Contender], only: str | None, skip: str | None) -> list[Contender]:
    """The contenders ``only`` names (all when None) less those ``skip`` names, in table order."""
    names = [c.name for c in every]

    def matching(option: str, spec: str) -> set[str]:
        patterns = [p.strip() for p in spec.split(",") if p.strip()]
        if not patterns:
            raise UsageError(f"--{option} needs contender names, e.g. --{option} raypipe-cpu-f32,dali-cpu")
        found = set()
        for pattern in patterns:
            hits = fnmatch.filter(names, pattern)
            if not hits:
                raise UsageError(f"--{option}: no contender matches {pattern!r} (contenders: {', '.join(names)})")
            found.update(hits)
        return found

    keep = matching("only", only) if only is not None else set(names)
    if skip is not None:
        keep -= matching("skip", skip)
    if not keep:
        raise UsageError("--only and --skip leave no contender to run")
    return [c for c in every if c.name in keep]
