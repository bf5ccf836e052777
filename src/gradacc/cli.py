"""The ``gradacc`` command line: it only wires the sub-commands, which each concern defines in its own module (see
``SUBCOMMANDS``)."""

from __future__ import annotations

import argparse
import importlib
import sys

# Modules that define ``add_cli(subparsers)``; each registers its sub-command(s) and sets ``func`` on its parser.
SUBCOMMANDS: tuple[str, ...] = (
    "gradacc.course.cli",
    "gradacc.course.badges",
    "gradacc.course.site",
    "gradacc.course.translation.cli",
    "gradacc.grading.cli",
    "gradacc.grading.export",
    "gradacc.grading.autograders",
    "gradacc.grading.classroom",
    "gradacc.bench",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gradacc", description="Helpers of the gradient-accumulation course.")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for module in SUBCOMMANDS:
        importlib.import_module(module).add_cli(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
