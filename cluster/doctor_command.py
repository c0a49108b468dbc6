"""Which stage limits a running service and what to try, from its measurements.

    raypipe doctor imagenet           # verdict, evidence, suggestions
    raypipe doctor imagenet --json    # svc.report() as JSON

The ranks must have trained for a while (the stall is measured per batch). For the strongest
answer, train a few hundred steps on ``rp.synthetic_loader(loader)`` first: the report then
compares training speed with the real loader against synthetic data."""

from __future__ import annotations

import argparse
import json

HELP = "diagnose a running service's bottleneck (CPU, I/O, GPU or transfer) and suggest fixes"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``raypipe doctor``."""
    parser.add_argument("name", help="the service's name (rp.serve(..., name=...))")
    parser.add_argument("--json", action="store_true", help="print svc.report() as JSON")


def run(args: argparse.Namespace) -> int:
    """Print the report; exit status 0 whatever the verdict."""
    from .diagnosis import format_report
    from .service import connect

    report = connect(args.name).report()
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    return 0
