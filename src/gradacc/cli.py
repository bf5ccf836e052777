"""The ``gradacc`` command line: it only wires the sub-commands, which each concern defines in its own module (see
``SUBCOMMANDS``)."""

from __future__ import annotations

import argparse
import importlib
import sys

# Modules that define ``add_cli(subparsers)``, and the sub-commands each registers (setting ``func`` on its parser).
# ``gradacc COMMAND`` imports only COMMAND's module: ``gradacc grade`` does not import torch (``gradacc.memory.bench``
# does), which cost every grading process about 2 s of CPU (each shard of a job array, each `gradacc progress`).
SUBCOMMANDS: dict[str, tuple[str, ...]] = {
    "gradacc.course.cli": ("exercises", "execute"),
    "gradacc.course.badges": ("badges",),
    "gradacc.course.site": ("site",),
    "gradacc.course.release": ("release",),
    "gradacc.course.translation.cli": ("translate",),
    "gradacc.grading.cli": ("grade", "grade-bench"),
    "gradacc.grading.export": ("export",),
    "gradacc.grading.autograders": ("export-assignments",),
    "gradacc.grading.classroom": ("classroom",),
    "gradacc.grading.shards": ("grade-merge", "grade-shards"),
    "gradacc.grading.progress": ("progress",),
    "gradacc.grading.misconceptions": ("misconceptions",),
    "gradacc.grading.similarity": ("similarity",),
    "gradacc.memory.bench": ("bench",),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every sub-command, or of ``command``'s alone when it is one of ``SUBCOMMANDS``."""
    # jsonschema (imported with nbformat by most sub-commands) imports rfc3987_syntax when it is installed, which
    # builds about 35 Lark parsers: 0.7-1.5 s of CPU in every `gradacc` process for the "iri" formats no notebook
    # schema uses (gradacc.course.nbval_run._RUNNER_PRELUDE spares every nbval run the same).
    sys.modules.setdefault("rfc3987_syntax", None)
    parser = argparse.ArgumentParser(prog="gradacc", description="Helpers of the gradient-accumulation course.")
    subparsers = parser.add_subparsers(dest="command", required=True)
    modules = [m for m, commands in SUBCOMMANDS.items() if command in commands] or list(SUBCOMMANDS)
    for module in modules:
        importlib.import_module(module).add_cli(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(argv[0] if argv else None).parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
