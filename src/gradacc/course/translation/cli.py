"""``gradacc translate extract | build | check | status``: the commands of the Brazilian Portuguese edition (locale/README.md).

``make translations`` runs ``extract`` then ``build``: after an English notebook or page changes, it marks the changed
entries fuzzy and rewrites the edition; after a translator edits a catalog, it rewrites the edition. The commands
import polib, Babel and markdown-it-py when they run (the package's ``translate`` extra), so ``gradacc`` works
without them where nobody translates (Colab).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

__all__ = ["catalog_stats", "add_cli"]


def catalog_stats(root: Path) -> list[dict]:
    """Per catalog: ``source``, ``entries``, ``translated`` (finished), ``fuzzy``, ``untranslated``, ``words`` (of the
    English, outside code, math and links), ``in_scope`` (listed in ``translated.txt``)."""
    from .catalogs import DOMAIN, catalog_path, read_catalog, scope, sources
    from .review import prose

    finished = set(scope(root))
    rows = []
    for source in [*sources(root), DOMAIN]:
        catalog = read_catalog(catalog_path(root, source))
        entries = [e for e in catalog or () if not e.obsolete]
        rows.append(
            {
                "source": source,
                "entries": len(entries),
                "translated": sum(1 for e in entries if e.msgstr and not e.fuzzy),
                "fuzzy": sum(1 for e in entries if e.fuzzy),
                "untranslated": sum(1 for e in entries if not e.msgstr),
                "words": sum(len(re.findall(r"[^\W\d_]+", prose(e.msgid))) for e in entries),
                "in_scope": source in finished,
            }
        )
    return rows


def _cmd_extract(args: argparse.Namespace) -> int:
    from .catalogs import extract

    root = Path(args.root)
    if not (root / "lessons").is_dir():
        print(f"error: no lessons/ under {root}; run from the course's root folder", file=sys.stderr)
        return 2
    changed = extract(root, write=not args.check)
    for path in changed:
        print(f"{'stale' if args.check else 'updated'}: {path.relative_to(root)}")
    if args.check and changed:
        print("run `gradacc translate extract` (or `make translations`)")
        return 1
    if not changed:
        print("the catalogs hold every unit of the English sources")
    return 0


def _cmd_build(args: argparse.Namespace) -> int:
    from .edition import build

    root = Path(args.root)
    try:
        changed, missing = build(root, write=not args.check)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for path in changed:
        print(f"{'stale' if args.check else 'wrote'}: {path.relative_to(root)}")
    for source, context, text in missing[:10]:
        where = f", cell {context}" if context else ""
        print(f"not in a catalog: {source}{where}: {text[:70]!r}")
    if missing:
        print(f"{len(missing)} English units are in no catalog (kept in English): run `gradacc translate extract`")
    if args.check and (changed or missing):
        print("run `make translations`")
        return 1
    if not changed:
        print("the pt-BR edition is up to date")
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    from .review import review

    problems = review(Path(args.root))
    titles = {
        "unfinished": "not finished (in translated.txt)",
        "kept": "numbers, code, math, links or markup changed",
        "glossary": "glossary",
    }
    for kind, found in problems.items():
        if found:
            print(f"{titles[kind]}: {len(found)}")
            for line in found:
                print(f"  {line}")
    if not any(problems.values()):
        print("every finished catalog is complete, and every translation keeps what it must")
    return 1 if any(problems.values()) else 0


def _cmd_run(args: argparse.Namespace) -> int:
    from .edition import build
    from .outputs import run_edition_notebook

    root = Path(args.root)
    build(root)  # the pt-BR code of the current catalogs first
    for source in args.sources:
        english = source.removeprefix("pt-BR/")
        summary = run_edition_notebook(root, english, timeout=args.timeout)
        print(
            f"{english}: stored the pt-BR run's outputs of {summary['cells']} code cells, {summary['figures']} "
            f"figures ({summary['seconds']} s)"
        )
        build(root)
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    rows = catalog_stats(Path(args.root))
    print(f"{'catalog':44s} {'entries':>7s} {'words':>6s} {'done':>5s} {'fuzzy':>5s} {'todo':>5s}  in translated.txt")
    for r in rows:
        mark = "yes" if r["in_scope"] else ""
        print(
            f"{r['source']:44s} {r['entries']:7d} {r['words']:6d} {r['translated']:5d} {r['fuzzy']:5d} "
            f"{r['untranslated']:5d}  {mark}"
        )
    total = {k: sum(r[k] for r in rows) for k in ("entries", "words", "translated", "fuzzy", "untranslated")}
    print(
        f"{'all':44s} {total['entries']:7d} {total['words']:6d} {total['translated']:5d} {total['fuzzy']:5d} "
        f"{total['untranslated']:5d}"
    )
    return 0


def add_cli(subparsers) -> None:
    p = subparsers.add_parser("translate", help="the Brazilian Portuguese edition: catalogs (locale/) and pt-BR/")
    sub = p.add_subparsers(dest="translate_command", required=True)
    q = sub.add_parser("extract", help="update locale/pt_BR/LC_MESSAGES/*.po from the English sources (msgmerge)")
    q.add_argument("--root", default=".", help="the course's root folder")
    q.add_argument("--check", action="store_true", help="write nothing; list stale catalogs and exit 1 if any")
    q.set_defaults(func=_cmd_extract)
    q = sub.add_parser("build", help="write pt-BR/, README.pt-BR.md and gradacc.mo from the sources and catalogs")
    q.add_argument("--root", default=".", help="the course's root folder")
    q.add_argument("--check", action="store_true", help="write nothing; list stale files and exit 1 if any")
    q.set_defaults(func=_cmd_build)
    q = sub.add_parser("check", help="what the tests check: finished catalogs, kept numbers/code/links, glossary")
    q.add_argument("--root", default=".", help="the course's root folder")
    q.set_defaults(func=_cmd_check)
    q = sub.add_parser(
        "run",
        help="run pt-BR notebooks and store their outputs and figures (locale/pt_BR/outputs/), then build: after "
        "changing a lesson's code or its strings' translations",
    )
    q.add_argument("sources", nargs="+", help="English notebooks (lessons/01_theory.ipynb) or their pt-BR files")
    q.add_argument("--root", default=".", help="the course's root folder")
    q.add_argument("--timeout", type=int, default=900, help="seconds per cell")
    q.set_defaults(func=_cmd_run)
    q = sub.add_parser("status", help="entries, words, finished, fuzzy and untranslated entries per catalog")
    q.add_argument("--root", default=".", help="the course's root folder")
    q.set_defaults(func=_cmd_status)
