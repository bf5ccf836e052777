"""The course's website (``make site``, ``gradacc site``): the lessons and exercises with their stored outputs.

Built with **Jupyter Book 1** (``jupyter-book`` 1.0.4.post1: Sphinx 7.4, myst-nb 1.4, sphinx-book-theme 1.3), not
Jupyter Book 2: ``jupyter-book`` 2.1.7 (mystmd 1.11) fetches its HTML theme at build time (``Querying template
metadata from https://api.mystmd.org/templates/site/myst/book-theme``, then a zip from GitHub: the build stops with
``getaddrinfo ENOTFOUND api.mystmd.org`` here), and that theme is neither on npm (myst-theme's
``themes/book/package.json`` says ``"private": true``) nor on PyPI. Jupyter Book 1's theme is a PyPI package, and the
one thing it loads from a CDN by default, MathJax, comes from npm (``docs/package.json``) into the site.

``build_site`` does, in ``build/``:

1. **stage** ``build/site-src/`` in the repository's layout (a page's path is its notebook's path, so the Colab and
   Binder buttons open that notebook): ``docs/`` (the pages; ``docs/_config.yml`` and ``docs/_toc.yml`` go to the
   root), ``lessons/`` and ``exercises/`` (never ``solutions/`` or ``hidden/``), a glossary page made from lesson 01's
   "Words used in this course", and the lesson table of ``docs/index.md`` made from ``lessons/`` (``lesson_table``).
   Notebooks keep their stored outputs; ``site_notebook`` says the few things it changes;
2. **build** with ``jupyter-book build --warningiserror``: nothing is executed, and a warning (a broken link, a
   missing page) fails the build;
3. **publish** the HTML to ``build/site/`` and put the committed notebooks in its ``_sources/`` (the download button
   gives the repository's file, not the staged copy).
"""

from __future__ import annotations

import argparse
import copy
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat

from .badges import BADGES_ID, read_repository
from .notebooks import _dump, _tags, reading_minutes

NOTEBOOK_FOLDERS = ("lessons", "exercises")  # what the site publishes besides docs/; solutions/ and hidden/ never
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
LIVE_NOTE = (
    "```{note}\nThe picture above is the widget as it opens: for the memory explorer, its bars, and its verdict and "
    "timeline at two values of N. The interactive widget (sliders, buttons) needs a Python kernel: it runs in "
    "JupyterLab (`make lab`), on Colab or on Binder (the rocket button at the top of this page opens both).\n```"
)
_LINK = re.compile(r"(!?\[[^\]]*\]\()([^)\s]+)(\))")
TABLE_MARK = re.compile(r"^<!-- gradacc site: the lesson table.*-->$", re.M)
GLOSSARY_HEADING = "## Words used in this course"


@dataclass
class SiteBuild:
    """What ``build_site`` made: the output folder, its pages, the build's log and seconds."""

    out: Path
    pages: list[str]
    log: str
    seconds: float


def _site_path(target: str, page: str) -> str | None:
    """The repository path a relative link of ``page`` (a repository path) points to, or None for an absolute URL,
    an anchor in the same page or a path that leaves the repository."""
    if re.match(r"^[a-z]+:", target) or target.startswith(("#", "/")):
        return None
    path = os.path.normpath(os.path.join(os.path.dirname(page), target.split("#", 1)[0]))
    return None if path.startswith("..") else path


def retarget_links(text: str, page: str, published: set[str], repository_url: str, branch: str) -> str:
    """Rewrite the relative links of ``page`` (a repository path) that leave the site: ``README.md`` becomes
    ``docs/index.md`` (Start here, which has the lesson table); any other file or folder outside ``published`` (the
    site's pages, as repository paths) the file or folder on GitHub."""

    def fix(match: re.Match) -> str:
        target = match.group(2)
        path = _site_path(target, page)
        if path is None:
            return match.group(0)
        anchor = target[len(target.split("#", 1)[0]) :]
        if path == "README.md":
            new = os.path.relpath("docs/index.md", os.path.dirname(page) or ".") + anchor
        elif path in published:
            return match.group(0)
        else:
            kind = "tree" if target.split("#", 1)[0].endswith("/") else "blob"
            new = f"{repository_url}/{kind}/{branch}/{path}{anchor}"
        return f"{match.group(1)}{new}{match.group(3)}"

    return _LINK.sub(fix, text)


def site_notebook(nb: nbformat.NotebookNode, folder: str) -> nbformat.NotebookNode:
    """The notebook as the site shows it: its stored outputs, with these changes only:

    * the badges cell is left out (the page's launch buttons open the same notebook, and the badges are images from
      colab.research.google.com and mybinder.org);
    * a widget output (an ``application/vnd.jupyter.widget-view+json`` view, whose state is not stored) is replaced
      by its figure and a note saying where the widget runs live when it carries one (the memory explorer), and is
      left out when it does not (a progress bar, whose text is its first frame, 0 %);
    * in ``exercises/``, the check cells' stored ``Exercise X.Y: correct`` lines are left out (they are what nbval
      compares a learner's run with, not a result of the empty answer above them).
    """
    nb = copy.deepcopy(nb)
    nb.cells = [c for c in nb.cells if c.get("id") != BADGES_ID]
    cells = []
    for cell in nb.cells:
        cells.append(cell)
        if cell.cell_type != "code":
            continue
        if folder == "exercises" and "check" in _tags(cell):
            cell.outputs = []
        kept, figure = [], False
        for out in cell.outputs:
            data = out.get("data", {})
            if WIDGET_VIEW not in data:
                kept.append(out)
            elif "image/png" in data:
                kept.append(nbformat.from_dict({**out, "data": {"image/png": data["image/png"]}}))
                figure = True
        cell.outputs = kept
        if figure:
            cells.append(nbformat.v4.new_markdown_cell(LIVE_NOTE))
    nb.cells = cells
    return nb


def lesson_table(root: Path) -> str:
    """A markdown table of ``lessons/``: number, title (a link), the title cell's first paragraph (what the learner
    will be able to do), and minutes for the core path / the whole lesson (``reading_minutes``, rounded to 5 as in the
    README)."""
    rows = ["| # | lesson | you will be able to | minutes: core path / all |", "|---|---|---|---|"]
    for path in sorted((root / "lessons").glob("*.ipynb")):
        first = nbformat.read(path, as_version=4).cells[0].source
        title = re.search(r"^#\s+(.+?)\s*$", first, re.M).group(1)
        goal = " ".join(first.split("\n\n")[1].split()) if "\n\n" in first else ""
        core, full = (5 * round(reading_minutes(path, core_only=only) / 5) for only in (True, False))
        number, name = title.split(" · ", 1) if " · " in title else (path.stem[:2], title)
        rows.append(f"| {number} | [{name}](../lessons/{path.name}) | {goal} | {core} / {full} |")
    return "\n".join(rows) + "\n"


def glossary_page(root: Path) -> str:
    """The glossary page: lesson 01's "Words used in this course" as a Sphinx glossary (each term with an anchor and
    a search entry), linking back to the lesson."""
    lesson = root / "lessons" / "01_theory.ipynb"
    cell = next(c.source for c in nbformat.read(lesson, as_version=4).cells if GLOSSARY_HEADING in c.source)
    section = cell.split(GLOSSARY_HEADING, 1)[1].split("\n## ", 1)[0]
    items = re.findall(r"^- (.+?)(?=^- |\Z)", section, re.M | re.S)
    entries = []
    for item in items:
        terms = re.findall(r"\*\*(.+?)\*\*", item)
        if not terms:
            raise ValueError(f"lessons/01_theory.ipynb: a glossary item without a **term**: {item!r}")
        entries.append(f"{terms[0]}\n  {' '.join(item.split())}\n")
    return (
        "# Glossary\n\nThe words the lessons use, as [lesson 01](../lessons/01_theory.ipynb#words-used-in-this-course) "
        "defines them (every term is defined before its first use).\n\n```{glossary}\n" + "\n".join(entries) + "```\n"
    )


def _mathjax(root: Path, folder: Path) -> None:
    """MathJax 3 from npm (``docs/package.json``; ``npm ci`` in ``build/site-npm``, once per lock file) into
    ``folder/mathjax``: the combined TeX component, the extensions it loads on demand, the CHTML fonts, the menu and
    accessibility components. Not into ``_static``: Jupyter Book puts a script tag for every ``.js`` file there on
    every page, and MathJax's components, loaded that way as well as by MathJax itself, raised 6 errors per page."""
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError(
            "npm is needed for MathJax (the site serves it itself): install Node.js (apt-get install npm)"
        )
    npm_dir = root / "build" / "site-npm"
    lock = (root / "docs" / "package-lock.json").read_bytes()
    done = npm_dir / "node_modules" / ".gradacc-installed-lock.json"  # written once `npm ci` of this lock succeeded
    if not done.exists() or done.read_bytes() != lock:
        shutil.rmtree(npm_dir, ignore_errors=True)
        npm_dir.mkdir(parents=True)
        shutil.copy2(root / "docs" / "package.json", npm_dir / "package.json")
        (npm_dir / "package-lock.json").write_bytes(lock)
        proc = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=npm_dir, capture_output=True, text=True
        )
        if proc.returncode:
            raise RuntimeError(f"npm ci failed in {npm_dir}:\n{proc.stdout}\n{proc.stderr}")
        done.write_bytes(lock)
    es5 = npm_dir / "node_modules" / "mathjax" / "es5"
    target = folder / "mathjax"
    target.mkdir(parents=True)
    shutil.copy2(es5 / "tex-mml-chtml.js", target)
    for sub in ("input", "output/chtml", "ui", "a11y", "sre", "adaptors"):
        if (es5 / sub).is_dir():
            shutil.copytree(es5 / sub, target / sub)


def stage(root: Path, src: Path) -> list[str]:
    """Lay out the site's sources in ``src`` (emptied first); returns the pages' repository paths."""
    repo = read_repository(root / "pyproject.toml")
    if src.exists():
        shutil.rmtree(src)
    (src / "docs").mkdir(parents=True)
    pages = [
        p.relative_to(root).as_posix()
        for p in sorted((root / "docs").rglob("*.md"))
        if not any(part.startswith(("_", ".")) or part == "node_modules" for part in p.relative_to(root).parts)
    ]
    pages += [f"{f}/{p.name}" for f in NOTEBOOK_FOLDERS for p in sorted((root / f).glob("*.ipynb"))]
    published = {*pages, "docs/glossary.md"}

    def links(text: str, page: str) -> str:
        return retarget_links(text, page, published, repo.url, repo.branch)

    for page in pages:
        target = src / page
        target.parent.mkdir(parents=True, exist_ok=True)
        if page.endswith(".md"):
            text = (root / page).read_text(encoding="utf-8")
            if page == "docs/index.md":
                text, found = TABLE_MARK.subn(lambda _: lesson_table(root), text)
                if found != 1:
                    raise ValueError(f"docs/index.md: no line matching {TABLE_MARK.pattern} for the lesson table")
            target.write_text(links(text, page), encoding="utf-8")
        else:
            nb = site_notebook(nbformat.read(root / page, as_version=4), page.split("/")[0])
            for cell in nb.cells:
                if cell.cell_type == "markdown":
                    cell.source = links(cell.source, page)
            target.write_text(_dump(nb), encoding="utf-8")
    (src / "docs" / "glossary.md").write_text(glossary_page(root), encoding="utf-8")
    import yaml  # pinned for the tests and the site (requirements.txt); not a dependency of the package

    config = yaml.safe_load((root / "docs" / "_config.yml").read_text(encoding="utf-8"))
    config["repository"] = {"url": repo.url, "branch": repo.branch, "path_to_book": ""}
    (src / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    shutil.copy2(root / "docs" / "_toc.yml", src / "_toc.yml")
    shutil.copytree(root / "docs" / "_static", src / "_static")
    _mathjax(root, src / "_extra")  # published as mathjax/ (html_extra_path), not loaded by every page
    return pages + ["docs/glossary.md"]


def build_site(root: Path, out: Path | None = None, *, work: Path | None = None) -> SiteBuild:
    """Stage, build and publish the site into ``out`` (default ``root/build/site``), staging in ``work`` (default
    ``root/build``: ``site-src/`` and ``site-work/``). MathJax's npm install is kept in ``root/build/site-npm``.

    Raises:
        RuntimeError: npm is missing or failed, or ``jupyter-book build`` failed (a warning counts), with its log.
    """
    start = time.perf_counter()
    out, work = out or root / "build" / "site", work or root / "build"
    src, html = work / "site-src", work / "site-work"
    pages = stage(root, src)
    shutil.rmtree(html, ignore_errors=True)
    command = [
        str(Path(sys.executable).parent / "jupyter-book"), "build", str(src), "--path-output", str(html),
        "--builder", "html", "--warningiserror", "--keep-going",
    ]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, cwd=root)
    log = proc.stdout + proc.stderr
    if proc.returncode:
        raise RuntimeError(f"jupyter-book build failed (exit {proc.returncode}):\n{log[-6000:]}")
    shutil.rmtree(out, ignore_errors=True)
    shutil.move(str(html / "_build" / "html"), str(out))
    shutil.rmtree(html)
    for page in pages:  # the download button gives the committed notebook, not the staged copy
        if page.endswith(".ipynb"):
            shutil.copy2(root / page, out / "_sources" / page)
    return SiteBuild(out, pages, log, time.perf_counter() - start)


def _cmd_site(args: argparse.Namespace) -> int:
    root = Path(args.root).resolve()
    try:
        built = build_site(root, Path(args.out).resolve() if args.out else None)
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    size = sum(p.stat().st_size for p in built.out.rglob("*") if p.is_file()) / 2**20
    print(f"built {len(built.pages)} pages into {built.out} in {built.seconds:.1f} s ({size:.1f} MiB)")
    return 0


def add_cli(subparsers) -> None:
    p = subparsers.add_parser("site", help="build the course's website into build/site/ (offline, no execution)")
    p.add_argument("--root", default=".", help="the course's root folder")
    p.add_argument("--out", help="output folder (default: ROOT/build/site)")
    p.set_defaults(func=_cmd_site)
