"""The ``gradacc exercises`` and ``gradacc execute`` sub-commands: making and refreshing the course's notebooks."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _cmd_exercises(args: argparse.Namespace) -> int:
    from .notebooks import stale_exercises, write_exercises

    solutions, exercises = Path(args.solutions), Path(args.exercises)
    if not solutions.is_dir():
        print(f"error: solutions folder {solutions} does not exist; run from the course's root folder", file=sys.stderr)
        return 2
    if args.check:
        stale = stale_exercises(solutions, exercises)
        for name in stale:
            print(f"stale: {exercises / name} (run `gradacc exercises` or `make exercises`)")
        return 1 if stale else 0
    for path in write_exercises(solutions, exercises):
        print(f"wrote {path}")
    return 0


def _cmd_execute(args: argparse.Namespace) -> int:
    from .notebooks import execute_notebook

    for name in args.notebooks:
        seconds = execute_notebook(Path(name), timeout=args.timeout)
        print(f"executed {name} in {seconds:.1f} s")
    return 0


def add_cli(subparsers) -> None:
    p = subparsers.add_parser(
        "exercises", help="generate exercises/ from solutions/ (or --check that they are current)"
    )
    p.add_argument("--solutions", default="solutions")
    p.add_argument("--exercises", default="exercises")
    p.add_argument("--check", action="store_true", help="exit 1 and list stale exercises instead of writing")
    p.set_defaults(func=_cmd_exercises)
    p = subparsers.add_parser("execute", help="run notebooks in place on a fresh kernel and save them cleaned")
    p.add_argument("notebooks", nargs="+")
    p.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    p.set_defaults(func=_cmd_execute)
