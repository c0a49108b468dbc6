"""The ``raypipe`` console script: a thin argparse dispatcher, one subcommand per module.

A subcommand module has ``HELP`` (one line), ``add_arguments(parser)`` and ``run(args) -> int``
(the exit status); adding one is a line in ``SUBCOMMANDS``. ``stats`` and ``doctor`` live in the
``cluster`` package (they talk to a running service) and import Ray's cluster code only when run.
A ``UsageError`` raised by ``run`` is reported as argparse reports its own errors: usage, message,
exit status 2; any other raypipe error (bad data naming the file, a service that does not exist)
as one line, exit status 1.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from raypipe.errors import RaypipeError, UsageError

SUBCOMMANDS = {
    "bench": "raypipe.bench.command",
    "convert": "raypipe.convert.command",
    "doctor": "cluster.doctor_command",
    "index": "raypipe.formats.index_command",
    "stats": "cluster.stats_command",
}


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` (default: the command line) and run the chosen subcommand."""
    parser = argparse.ArgumentParser(prog="raypipe", description="raypipe: DALI-style data pipelines served with Ray")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    parsers = {}
    for name, module_name in SUBCOMMANDS.items():
        module = importlib.import_module(module_name)
        parsers[name] = commands.add_parser(
            name, help=module.HELP, description=module.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
        )
        module.add_arguments(parsers[name])
        parsers[name].set_defaults(run=module.run)
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except UsageError as exc:
        parsers[args.command].error(str(exc))
    except RaypipeError as exc:
        print(f"raypipe {args.command}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
