"""The course's website (``make site``, ``gradacc site``): the lessons and exercises with their stored outputs, in
English and in Brazilian Portuguese.

Built with **Jupyter Book 1** (``jupyter-book`` 1.0.4.post1: Sphinx 7.4, myst-nb 1.4, sphinx-book-theme 1.3), not
Jupyter Book 2: ``jupyter-book`` 2.1.7 (mystmd 1.11) fetches its HTML theme at build time (``Querying template
metadata from https://api.mystmd.org/templates/site/myst/book-theme``, then a zip from GitHub: the build stops with
``getaddrinfo ENOTFOUND api.mystmd.org`` here), and that theme is neither on npm (myst-theme's
``themes/book/package.json`` says ``"private": true``) nor on PyPI. Jupyter Book 1's theme is a PyPI package, and the
one thing it loads from a CDN by default, MathJax, comes from npm (``docs/package.json``) into the site.

Two sites with one layout: the English one in ``build/site/`` from ``docs/``, ``lessons/`` and ``exercises/``, and
the Brazilian Portuguese one in ``build/site/pt-BR/`` from the edition ``gradacc translate build`` generates
(``pt-BR/docs/``, ``pt-BR/lessons/``, ``pt-BR/exercises/``), with Sphinx's ``language`` ``pt_BR`` (the theme's labels
in Portuguese) and launch buttons that open the pt-BR notebooks. A page has the same path in both, and every page
carries a language switch (``docs/_templates/language-switch.html``) to the same page in the other language. A page
the edition does not translate (``ENGLISH_ONLY``: the maintainer notes) is, on the pt-BR site, a short page that
links to the English one.

``build_site`` does, in ``build/``:

1. **stage** ``build/site-src/`` (English) and ``build/site-src-pt-BR/`` in the repository's layout (a page's path
   is its notebook's path, so the Colab and Binder buttons open that notebook): ``docs/`` (the pages;
   ``docs/_config.yml`` and ``docs/_toc.yml`` go to the root), ``lessons/`` and ``exercises/`` (never ``solutions/``
   or ``hidden/``), a glossary page made from lesson 01's "Words used in this course", and the lesson table of
   ``docs/index.md`` made from ``lessons/`` (``lesson_table``). Notebooks keep their stored outputs;
   ``site_notebook`` says the few things it changes;
2. **build** both with ``jupyter-book build --warningiserror``, at the same time: nothing is executed, and a warning
   (a broken link, a missing page) fails the build;
3. **publish** the HTML to ``build/site/`` and ``build/site/pt-BR/`` (each page through ``accessible_html``) and put
   the committed notebooks in their ``_sources/`` (the download button gives the repository's file, not the staged
   copy).
"""

from __future__ import annotations

import argparse
import copy
import html
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat
import polib

from ..i18n import N_, translate
from .badges import BADGES_ID, read_repository
from .notebooks import _dump, reading_minutes
from .translation.catalogs import EDITION, LANGUAGE
from .translation.edition import slug

NOTEBOOK_FOLDERS = ("lessons", "exercises")  # what the site publishes besides docs/; solutions/ and hidden/ never
LANGUAGES = {"en": "", LANGUAGE: EDITION}
"""The site's languages and the folder of each edition, in the repository and on the site (English at the root)."""
_NAMES = {"en": ("en", "English"), LANGUAGE: ("pt-BR", "Português")}  # HTML lang, the language's name in itself
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
LIVE_NOTE = N_(
    "The picture above is the widget as it opens: for the memory explorer, its bars, and its verdict and timeline at "
    "two values of N. The interactive widget (sliders, buttons) needs a Python kernel: it runs in JupyterLab "
    "(`{command}`), on Colab or on Binder (the rocket button at the top of this page opens both)."
)
_LAB = {"en": "make lab", LANGUAGE: "make lab-pt"}  # JupyterLab on the edition (Makefile)
ENGLISH_ONLY = {"docs/maintainers.md": N_("Maintainer notes")}
"""The English pages the edition does not translate, with their titles: on the pt-BR site, a page linking to them."""
# the words of docs/_config.yml and docs/_toc.yml a reader sees (the title and author, the contents' captions), marked
# here for the catalog: stage() looks them up in the site's language
_CONFIG_TEXT = (N_("Gradient accumulation"), N_("the gradacc course"))
_CAPTIONS = (N_("Lessons"), N_("Exercises"), N_("Instructors"), N_("Reference"))
THEME_TEXT = (
    # TRANSLATORS: the website's labels that come from its theme (pydata-sphinx-theme): buttons, tooltips, navigation
    N_("Skip to main content"), N_("Back to top"), N_("On this page"), N_("previous page"), N_("next page"),
    N_("Color mode"), N_("Light"), N_("Dark"), N_("System Settings"), N_("Site navigation"), N_("Click to expand"),
    N_("Click to collapse"), N_("Section Navigation"), N_("Breadcrumb"), N_("Home"), N_("Version warning"),
    N_("Announcement"),
)  # fmt: skip
"""pydata-sphinx-theme 0.17.1's labels (``_()`` in its templates: its ``locale/sphinx.pot``) that it has no Portuguese
for (its ``locale/`` has ca, cs, de, en, es, fr, it, ja, ru, zh): ``stage`` writes them in the site's language as the
site's own ``sphinx`` catalog (Sphinx's ``locale_dirs``), which Sphinx reads before its own and the theme's."""
_LINK = re.compile(r"(!?\[[^\]]*\]\()([^)\s]+)(\))")
TABLE_MARK = re.compile(r"^<!-- gradacc site: the lesson table.*-->$", re.M)
GLOSSARY_HEADING = "## Words used in this course"


@dataclass
class SiteBuild:
    """What ``build_site`` made: the output folder, its pages (each site's, as staged paths), the builds' log and
    seconds."""

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


def retarget_links(
    text: str, page: str, published: dict[str, tuple[str, str]], repository_url: str, branch: str
) -> str:
    """Rewrite the relative links of ``page`` (a repository path) for the site.

    ``published`` maps a repository path to the site's (edition folder, staged path) that shows it: every page of
    both editions, and ``README.md`` (``README.pt-BR.md``) to its edition's ``docs/index.md`` (Start here, which has
    the lesson table). A link to a page of the same edition points to its staged source; a link to a page of the
    other edition (the English maintainer notes, from the pt-BR pages) becomes an HTML link to that page on the
    other site; any other file or folder, the file or folder on GitHub."""
    edition, here = published[page]

    def fix(match: re.Match) -> str:
        target = match.group(2)
        path = _site_path(target, page)
        if path is None:
            return match.group(0)
        anchor = target[len(target.split("#", 1)[0]) :]
        if path in published and published[path][0] == edition:
            new = os.path.relpath(published[path][1], os.path.dirname(here) or ".") + anchor
        elif path in published and not match.group(1).startswith("!"):
            folder, staged = published[path]
            there = os.path.join(folder, os.path.splitext(staged)[0] + ".html")
            href = os.path.relpath(there, os.path.join(edition, os.path.dirname(here))) + anchor
            return f'<a href="{html.escape(href)}">{match.group(1)[1:-2]}</a>'
        else:
            kind = "tree" if target.split("#", 1)[0].endswith("/") else "blob"
            new = f"{repository_url}/{kind}/{branch}/{path}{anchor}"
        return f"{match.group(1)}{new}{match.group(3)}"

    return _LINK.sub(fix, text)


def site_notebook(nb: nbformat.NotebookNode, folder: str, lang: str = "en") -> nbformat.NotebookNode:
    """The notebook as the site shows it: its stored outputs, with these changes only:

    * the badges cell is left out (the page's launch buttons open the same notebook, and the badges are images from
      colab.research.google.com and mybinder.org);
    * a widget output (an ``application/vnd.jupyter.widget-view+json`` view, whose state is not stored) is replaced
      by its figure and a note saying where the widget runs live (``LIVE_NOTE`` in ``lang``) when it carries one
      (the memory explorer), and is left out when it does not (a progress bar, whose text is its first frame, 0 %).

    An exercise's check cells store no output (``generate_exercise``): nothing says "correct" under an empty answer.
    """
    nb = copy.deepcopy(nb)
    nb.cells = [c for c in nb.cells if c.get("id") != BADGES_ID]
    note = "```{note}\n" + translate(LIVE_NOTE, lang).format(command=_LAB[lang]) + "\n```"
    cells = []
    for cell in nb.cells:
        cells.append(cell)
        if cell.cell_type != "code":
            continue
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
            cells.append(nbformat.v4.new_markdown_cell(note))
    nb.cells = cells
    return nb


def lesson_table(root: Path, lang: str = "en") -> str:
    """A markdown table of the edition's ``lessons/``: number, title (a link), the title cell's first paragraph (what
    the learner will be able to do), and minutes for the core path / the whole lesson (``reading_minutes`` of the
    English lesson, rounded to 5 as in the README: the same lesson takes the same minutes in both editions)."""
    header = (N_("lesson"), N_("you will be able to"), N_("minutes: core path / all"))
    rows = [f"| # | {' | '.join(translate(h, lang) for h in header)} |", "|---|---|---|---|"]
    for english in sorted((root / "lessons").glob("*.ipynb")):
        path = root / LANGUAGES[lang] / "lessons" / english.name
        first = nbformat.read(path, as_version=4).cells[0].source
        title = re.search(r"^#\s+(.+?)\s*$", first, re.M).group(1)
        goal = " ".join(first.split("\n\n")[1].split()) if "\n\n" in first else ""
        core, full = (5 * round(reading_minutes(english, core_only=only) / 5) for only in (True, False))
        number, name = title.split(" · ", 1) if " · " in title else (path.stem[:2], title)
        rows.append(f"| {number} | [{name}](../lessons/{path.name}) | {goal} | {core} / {full} |")
    return "\n".join(rows) + "\n"


def glossary_page(root: Path, lang: str = "en") -> str:
    """The glossary page: lesson 01's "Words used in this course" (in the edition of ``lang``: the heading of the
    same level, at the same place, in the cell with the same id) as a Sphinx glossary (each term with an anchor and a
    search entry), linking back to the lesson."""
    lesson = "lessons/01_theory.ipynb"
    english = nbformat.read(root / lesson, as_version=4).cells
    where = next(c for c in english if GLOSSARY_HEADING in c.source)
    level = GLOSSARY_HEADING.split(" ", 1)[0] + " "
    index = [line for line in where.source.splitlines() if line.startswith(level)].index(GLOSSARY_HEADING)
    edition = nbformat.read(root / LANGUAGES[lang] / lesson, as_version=4).cells
    cell = next(c.source for c in edition if c.get("id") == where.get("id"))
    heading = [line for line in cell.splitlines() if line.startswith(level)][index]
    section = cell.split(heading, 1)[1].split("\n## ", 1)[0]
    items = re.findall(r"^- (.+?)(?=^- |\Z)", section, re.M | re.S)
    entries = []
    for item in items:
        terms = re.findall(r"\*\*(.+?)\*\*", item)
        if not terms:
            raise ValueError(f"{os.path.join(LANGUAGES[lang], lesson)}: a glossary item without a **term**: {item!r}")
        entries.append(f"{terms[0]}\n  {' '.join(item.split())}\n")
    intro = N_(
        "The words the lessons use, as [lesson 01]({link}) defines them (every term is defined before its first use)."
    )
    link = f"../{lesson}#{slug(heading[len(level) :])}"
    title = translate(N_("Glossary"), lang)
    return (
        f"# {title}\n\n{translate(intro, lang).format(link=link)}\n\n```{{glossary}}\n" + "\n".join(entries) + "```\n"
    )


def npm_modules(root: Path) -> Path:
    """The site's npm packages (``docs/package.json``, pinned by ``docs/package-lock.json``): ``npm ci`` in
    ``root/build/site-npm`` once per lock file; returns its ``node_modules``. MathJax, which the site serves, and
    axe-core, the accessibility audit ``tests/test_site.py`` runs on every page (never published).

    Raises:
        RuntimeError: npm is missing, or ``npm ci`` failed (its output)."""
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
    return npm_dir / "node_modules"


def _mathjax(root: Path, folder: Path) -> None:
    """MathJax 3 from npm (``npm_modules``) into ``folder/mathjax``: the combined TeX component, the extensions it
    loads on demand, the CHTML fonts, the menu and accessibility components. Not into ``_static``: Jupyter Book puts
    a script tag for every ``.js`` file there on every page, and MathJax's components, loaded that way as well as by
    MathJax itself, raised 6 errors per page."""
    es5 = npm_modules(root) / "mathjax" / "es5"
    target = folder / "mathjax"
    target.mkdir(parents=True)
    shutil.copy2(es5 / "tex-mml-chtml.js", target)
    for sub in ("input", "output/chtml", "ui", "a11y", "sre", "adaptors"):
        if (es5 / sub).is_dir():
            shutil.copytree(es5 / sub, target / sub)


_TOGGLE = N_("Show or hide this section's pages")
"""The name of the contents' disclosure buttons (``accessible_html``)."""
_NAMELESS_SUMMARY = '<summary><span class="toctree-toggle" role="presentation">'
_OUTPUT = '<div class="cell_output docutils container">'
_OUTPUT_END = re.compile(r'<div class="cell[ "]|<section|</section>')  # where an output area has surely ended


def accessible_html(text: str, lang: str = "en") -> str:
    """A page of the site as Jupyter Book 1 writes it, with what axe-core's audit (``tests/test_site.py``) finds
    missing added:

    * each ``<summary>`` of the contents' sections that pydata-sphinx-theme 0.17.1 makes with only a chevron icon in
      it (``toctree.py``: ``add_collapse_checkboxes``) is named (``_TOGGLE``, in ``lang``; summary-name, serious);
    * a figure's output area, which scrolls sideways when the figure is wider than the column (``site.css``), can
      take the keyboard's focus, so that it scrolls with the arrow keys (``tabindex="0"``;
      scrollable-region-focusable, serious)."""
    label = html.escape(translate(_TOGGLE, lang), quote=True)
    text = text.replace(_NAMELESS_SUMMARY, _NAMELESS_SUMMARY.replace("<summary>", f'<summary aria-label="{label}">'))
    parts = text.split(_OUTPUT)
    for i in range(1, len(parts)):
        end = _OUTPUT_END.search(parts[i])
        figure = "<img " in parts[i][: end.start() if end else len(parts[i])]
        parts[i] = (_OUTPUT.replace(">", ' tabindex="0">') if figure else _OUTPUT) + parts[i]
    return parts[0] + "".join(parts[1:])


def site_pages(root: Path) -> list[str]:
    """The pages both sites have, as staged paths: ``docs/`` (without ``_*`` folders), the notebooks of
    ``NOTEBOOK_FOLDERS`` and the glossary page."""
    pages = [
        p.relative_to(root).as_posix()
        for p in sorted((root / "docs").rglob("*.md"))
        if not any(part.startswith(("_", ".")) or part == "node_modules" for part in p.relative_to(root).parts)
    ]
    pages += [f"{f}/{p.name}" for f in NOTEBOOK_FOLDERS for p in sorted((root / f).glob("*.ipynb"))]
    return pages + ["docs/glossary.md"]


def _published(pages: list[str]) -> dict[str, tuple[str, str]]:
    """``retarget_links``'s map: repository path -> (edition folder, staged path), for both sites."""
    published = {}
    for folder in LANGUAGES.values():
        for page in pages:
            published[os.path.join(folder, page)] = (folder, page)
        published[f"README.{folder}.md" if folder else "README.md"] = (folder, "docs/index.md")
    return published


def stage(root: Path, src: Path, lang: str = "en") -> list[str]:
    """Lay out the sources of the site in ``lang`` (``LANGUAGES``) in ``src`` (emptied first); returns the pages'
    staged paths (``site_pages``: the same for every language).

    Raises:
        ValueError: the edition lacks a page of the English site that is not in ``ENGLISH_ONLY`` (run ``gradacc
            translate build``), or ``docs/index.md`` has no line for the lesson table.
    """
    repo = read_repository(root / "pyproject.toml")
    folder = LANGUAGES[lang]
    if src.exists():
        shutil.rmtree(src)
    (src / "docs").mkdir(parents=True)
    pages = site_pages(root)
    published = _published(pages)
    name = _NAMES[lang][1]

    for page in pages:
        if page == "docs/glossary.md":  # made from lesson 01, below
            continue
        source, target = os.path.join(folder, page), src / page
        target.parent.mkdir(parents=True, exist_ok=True)
        if not (root / source).is_file():
            if page not in ENGLISH_ONLY:
                raise ValueError(f"{source} is missing: `gradacc translate build` writes the {name} edition")
            href = os.path.relpath(os.path.splitext(page)[0] + ".html", os.path.join(folder, os.path.dirname(page)))
            title = ENGLISH_ONLY[page]
            link = f'<a href="{html.escape(href)}" hreflang="en" lang="en">{html.escape(title)}</a>'
            body = translate(N_("This page is in English only: {link}."), lang).format(link=link)
            target.write_text(f"# {translate(title, lang)}\n\n{body}\n", encoding="utf-8")
        elif page.endswith(".md"):
            text = (root / source).read_text(encoding="utf-8")
            if page == "docs/index.md":
                text, found = TABLE_MARK.subn(lambda _: lesson_table(root, lang), text)
                if found != 1:
                    raise ValueError(f"{source}: no line matching {TABLE_MARK.pattern} for the lesson table")
            target.write_text(retarget_links(text, source, published, repo.url, repo.branch), encoding="utf-8")
        else:
            nb = site_notebook(nbformat.read(root / source, as_version=4), page.split("/")[0], lang)
            for cell in nb.cells:
                if cell.cell_type == "markdown":
                    cell.source = retarget_links(cell.source, source, published, repo.url, repo.branch)
            target.write_text(_dump(nb), encoding="utf-8")
    (src / "docs" / "glossary.md").write_text(glossary_page(root, lang), encoding="utf-8")
    import yaml  # pinned for the tests and the site (requirements.txt); not a dependency of the package

    config = yaml.safe_load((root / "docs" / "_config.yml").read_text(encoding="utf-8"))
    config["title"] = translate(config["title"], lang)
    config["repository"] = {"url": repo.url, "branch": repo.branch, "path_to_book": folder}  # the launch buttons
    sphinx = config["sphinx"]["config"]
    sphinx["language"] = lang
    sphinx["html_theme_options"]["search_bar_text"] = translate(N_("Search this book..."), lang)
    if lang != "en":
        catalog = polib.POFile()
        catalog.metadata = {"Content-Type": "text/plain; charset=UTF-8", "Language": lang}
        for text in THEME_TEXT:
            catalog.append(polib.POEntry(msgid=text, msgstr=translate(text, lang)))
        (src / "_locale" / lang / "LC_MESSAGES").mkdir(parents=True)
        catalog.save_as_mofile(str(src / "_locale" / lang / "LC_MESSAGES" / "sphinx.mo"))
        sphinx["locale_dirs"] = ["_locale"]
    other = next(other for other in LANGUAGES if other != lang)
    sphinx["html_context"]["gradacc"] = {  # docs/_templates/: the language switch and the footer's author
        "label": translate(N_("Language"), lang),
        "current": name,
        "other": _NAMES[other][1],
        "other_lang": _NAMES[other][0],
        "other_prefix": f"{LANGUAGES[other]}/" if LANGUAGES[other] else "../",
        "byline": translate(N_("By {author}"), lang).format(author=translate(config["author"], lang)),
    }
    if folder:  # the English site's MathJax, one folder up
        sphinx["html_extra_path"] = []
        sphinx["mathjax_path"] = "../" * (folder.count("/") + 1) + sphinx["mathjax_path"]
    (src / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True), encoding="utf-8")
    toc = yaml.safe_load((root / "docs" / "_toc.yml").read_text(encoding="utf-8"))
    for part in toc["parts"]:
        part["caption"] = translate(part["caption"], lang)
    (src / "_toc.yml").write_text(yaml.safe_dump(toc, sort_keys=False, allow_unicode=True), encoding="utf-8")
    for extra in ("_static", "_templates"):
        shutil.copytree(root / "docs" / extra, src / extra)
    if not folder:
        _mathjax(root, src / "_extra")  # published as mathjax/ (html_extra_path), not loaded by every page
        # the site's /favicon.ico, which a browser asks for where a page names no icon (a 404 in its console before)
        shutil.copy2(root / "docs" / "_static" / "favicon.ico", src / "_extra" / "favicon.ico")
    return pages


def build_site(root: Path, out: Path | None = None, *, work: Path | None = None) -> SiteBuild:
    """Stage, build and publish both sites into ``out`` (default ``root/build/site``; the pt-BR one in
    ``out/pt-BR``), staging in ``work`` (default ``root/build``: ``site-src/``, ``site-src-pt-BR/``, ``site-work/``
    and ``site-work-pt-BR/``). MathJax's npm install is kept in ``root/build/site-npm``.

    Raises:
        RuntimeError: npm is missing or failed, or ``jupyter-book build`` failed (a warning counts), with its log.
        ValueError: a page of the English site is missing from the edition (``stage``).
    """
    start = time.perf_counter()
    out, work = out or root / "build" / "site", work or root / "build"
    folders = {lang: f"-{folder}" if folder else "" for lang, folder in LANGUAGES.items()}  # build/site-src-pt-BR
    for lang, suffix in folders.items():  # both staged before either build starts (stage raises on a missing page)
        pages = stage(root, work / f"site-src{suffix}", lang)
    builds = {}  # language -> (its build folder, its jupyter-book process): the two sites build at the same time
    for lang, suffix in folders.items():
        src, html_dir = work / f"site-src{suffix}", work / f"site-work{suffix}"
        shutil.rmtree(html_dir, ignore_errors=True)
        html_dir.mkdir(parents=True)
        command = [
            str(Path(sys.executable).parent / "jupyter-book"), "build", str(src), "--path-output", str(html_dir),
            "--builder", "html", "--warningiserror", "--keep-going",
        ]  # fmt: skip
        with open(html_dir / "build.log", "w", encoding="utf-8") as log:  # the child keeps its own descriptor
            builds[lang] = (html_dir, subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=root))
    logs, failed = [], []
    for lang, (html_dir, proc) in builds.items():
        code = proc.wait()
        logs.append(f"== {lang}\n" + (html_dir / "build.log").read_text(encoding="utf-8"))
        if code:
            failed.append(f"jupyter-book build of the {lang} site failed (exit {code}):\n{logs[-1][-6000:]}")
    if failed:
        raise RuntimeError("\n".join(failed))
    shutil.rmtree(out, ignore_errors=True)
    for lang, folder in LANGUAGES.items():
        html_dir = builds[lang][0]
        shutil.move(str(html_dir / "_build" / "html"), str(out / folder))
        shutil.rmtree(html_dir)
        for page in (out / folder).rglob("*.html"):  # the other edition's folder is not there yet, or is skipped
            parts = page.relative_to(out / folder).parts
            if "_static" not in parts and (folder or parts[0] not in LANGUAGES.values()):
                page.write_text(accessible_html(page.read_text(encoding="utf-8"), lang), encoding="utf-8")
        for page in pages:  # the download button gives the committed notebook, not the staged copy
            if page.endswith(".ipynb"):
                shutil.copy2(root / folder / page, out / folder / "_sources" / page)
    return SiteBuild(out, pages, "\n".join(logs), time.perf_counter() - start)


def _cmd_site(args: argparse.Namespace) -> int:
    root = Path(args.root).resolve()
    try:
        built = build_site(root, Path(args.out).resolve() if args.out else None)
    except (RuntimeError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    size = sum(p.stat().st_size for p in built.out.rglob("*") if p.is_file()) / 2**20
    print(
        f"built {len(built.pages)} pages in English into {built.out} and in Brazilian Portuguese into "
        f"{built.out / EDITION} in {built.seconds:.1f} s ({size:.1f} MiB)"
    )
    return 0


def add_cli(subparsers) -> None:
    p = subparsers.add_parser(
        "site", help="build the course's website into build/site/ and build/site/pt-BR/ (offline, no execution)"
    )
    p.add_argument("--root", default=".", help="the course's root folder")
    p.add_argument("--out", help="output folder (default: ROOT/build/site)")
    p.set_defaults(func=_cmd_site)
