"""Open-in-Colab and Binder badges and prev/next navigation in every notebook, from ONE configured repository URL.

``gradacc badges`` inserts or refreshes, in every notebook of ``lessons/``, ``solutions/`` and ``exercises/``:

* a markdown cell with id ``gradacc-badges`` right after the title cell: links that open that very file on Colab and on
  Binder (``https://colab.research.google.com/github/OWNER/REPO/blob/BRANCH/PATH`` and
  ``https://mybinder.org/v2/gh/OWNER/REPO/BRANCH?labpath=PATH``), as text: a badge image needs the internet, and an
  offline JupyterLab shows a broken image with its alt text in its place (the README and the website keep the images);
* a markdown cell with id ``gradacc-nav`` as the last cell: links to the previous and next notebook of the same folder
  (titles from their ``# NN · Topic`` headings), to the lesson or the exercise of the same number, and to the README;
* the repository URL in the Colab install line of the setup cell (``"gradacc[libs] @ git+https://github.com/..."``);

and the Colab and Binder columns of the README's lesson table. The repository URL is read from ``pyproject.toml``
(``[tool.gradacc] repository = "https://github.com/OWNER/REPO"``, optional ``branch``, default ``main``) unless given
with ``--repository``. Re-running changes nothing; ``--check`` lists what is out of date and exits 1.

Exercises are generated from solutions (``gradacc.course.notebooks.generate_exercise``), which calls
``retarget_badges(nb, "exercises")``: the badges a solution carries are rewritten to point at the exercise, and the
navigation cell is the same in both folders (its links are relative). So ``gradacc badges`` then ``gradacc exercises``
(or the other order) leaves ``gradacc exercises --check`` green.

Sources: Colab's GitHub URL scheme and badge (https://colab.research.google.com/github/ and
https://colab.research.google.com/assets/colab-badge.svg); Binder's ``labpath`` URL parameter and badge
(https://mybinder.readthedocs.io/en/latest/howto/user_interface.html).
"""

from __future__ import annotations

import argparse
import copy
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote

import nbformat
from nbformat.v4 import new_markdown_cell

from ..i18n import N_

__all__ = [
    "BADGES_ID",
    "NAV_ID",
    "FOLDERS",
    "Repository",
    "read_repository",
    "badges_markdown",
    "nav_markdown",
    "install_line_repository",
    "refresh_notebook",
    "retarget_badges",
    "refresh_readme",
    "refresh_course",
]

BADGES_ID = "gradacc-badges"
NAV_ID = "gradacc-nav"
FOLDERS: tuple[str, ...] = ("lessons", "solutions", "exercises")
COLAB_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
BINDER_BADGE = "https://mybinder.org/badge_logo.svg"

_GITHUB = re.compile(r"^https://github\.com/([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+?)(?:\.git)?/?$")
_COLAB_LINK = re.compile(
    r"https://colab\.research\.google\.com/github/([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+)/blob/([^/\s)]+)/([^\s)]+)"
)
# The Colab install line of a setup cell: `gradacc[libs] @ git+https://github.com/OWNER/REPO` (optionally `.git`, `@ref`).
_INSTALL = re.compile(
    r"(gradacc(?:\[[^\]]*\])?\s*@\s*git\+)(https://github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+?(?:\.git)?)(?=[@\"'\s#]|$)"
)
_TITLE = re.compile(r"^#\s+(.+?)\s*$", re.M)


@dataclass(frozen=True)
class Repository:
    """A GitHub repository (``owner/name``) and the branch the badges open."""

    owner: str
    name: str
    branch: str = "main"

    @classmethod
    def parse(cls, url: str, branch: str = "main") -> Repository:
        """Parse ``https://github.com/OWNER/REPO`` (a trailing ``.git`` or ``/`` is accepted).

        Raises:
            ValueError: not a github.com repository URL (Colab and Binder's ``gh`` provider open GitHub only), or an
                empty or malformed branch.
        """
        match = _GITHUB.match(str(url).strip())
        if not match:
            raise ValueError(
                f"repository must be a GitHub URL like https://github.com/OWNER/REPO, got {url!r} "
                "(set [tool.gradacc] repository in pyproject.toml or pass --repository)"
            )
        if not branch or any(c.isspace() for c in branch) or branch.startswith("/") or "?" in branch:
            raise ValueError(f"branch must be a git branch name like 'main', got {branch!r}")
        return cls(match.group(1), match.group(2), branch)

    @property
    def url(self) -> str:
        return f"https://github.com/{self.owner}/{self.name}"

    def colab_url(self, path: str) -> str:
        """Colab opens ``path`` (relative to the repository root, with ``/``) from GitHub."""
        return f"https://colab.research.google.com/github/{self.owner}/{self.name}/blob/{self.branch}/{path}"

    def binder_url(self, path: str) -> str:
        """mybinder.org builds the repository (binder/) and opens ``path`` in JupyterLab."""
        return f"https://mybinder.org/v2/gh/{self.owner}/{self.name}/{self.branch}?labpath={quote(path, safe='')}"

    def colab_badge(self, path: str) -> str:
        return f"[![Open In Colab]({COLAB_BADGE})]({self.colab_url(path)})"

    def binder_badge(self, path: str) -> str:
        return f"[![Binder]({BINDER_BADGE})]({self.binder_url(path)})"


def read_repository(pyproject: Path, *, repository: str | None = None, branch: str | None = None) -> Repository:
    """The configured repository: ``repository`` if given, else ``[tool.gradacc] repository`` of ``pyproject``.

    The branch is ``branch`` if given, else ``[tool.gradacc] branch``, else ``main``.

    Raises:
        ValueError: no repository given and none configured, or an invalid URL/branch (see ``Repository.parse``).
    """
    config: dict = {}
    if pyproject.exists():
        try:
            import tomllib
        except ModuleNotFoundError:  # Python 3.10
            import tomli as tomllib
        config = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("tool", {}).get("gradacc", {})
    url = repository or config.get("repository")
    if not url:
        raise ValueError(
            f'no repository configured: add [tool.gradacc] repository = "https://github.com/OWNER/REPO" to {pyproject} '
            "or pass --repository"
        )
    return Repository.parse(url, branch or config.get("branch", "main"))


BADGES_TEXT = N_("Run this notebook online, with nothing to install: [Colab]({colab}) · [Binder]({binder})")
"""The badges cell's text (a message of the package: the pt-BR edition translates it)."""


def badges_markdown(repo: Repository, path: str, template: str = BADGES_TEXT) -> str:
    """The source of the badges cell for the notebook at ``path`` (relative to the repository root, e.g.
    ``lessons/03_memory.ipynb``): two text links, which read the same offline (no image to load). ``template``:
    ``BADGES_TEXT`` or its translation."""
    return template.format(colab=repo.colab_url(path), binder=repo.binder_url(path))


def _title(path: Path) -> str:
    """``NN · Topic`` from the notebook's first ``# heading`` (the file's stem if it has none)."""
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells[:1]:
        if cell.cell_type == "markdown":
            match = _TITLE.search(cell.source)
            if match:
                return match.group(1).replace("[", "(").replace("]", ")")
    return path.stem


def _listing(root: Path, folder: str) -> list[str]:
    return sorted(p.name for p in (root / folder).glob("*.ipynb") if not p.name.startswith("."))


def nav_markdown(root: Path, folder: str, name: str, titles: dict | None = None) -> str:
    """The source of the navigation cell for ``root/folder/name``.

    Prev/next are the neighbours in the sorted ``*.ipynb`` listing of ``root/folder`` (for an exercise: of
    ``solutions/``, which exercises are generated from); a lesson links to its exercise when ``solutions/`` has one,
    a solution or exercise links to its lesson. All links are relative, so a solution's navigation is also right for
    the exercise generated from it.

    Raises:
        ValueError: ``folder`` is not one of ``FOLDERS`` or the notebook is not in it.
    """
    if folder not in FOLDERS:
        raise ValueError(f"folder must be one of {FOLDERS}, got {folder!r}")
    names = _listing(root, folder)
    source = folder
    if folder == "exercises" and name in _listing(root, "solutions"):
        # an exercise is generated from its solution: list and title them from solutions/, so the navigation is the
        # one generation copies, even while an exercise of a new solution is not generated yet
        names, source = _listing(root, "solutions"), "solutions"
    if name not in names:
        raise ValueError(f"{folder}/{name} does not exist under {root}")
    titles = titles if titles is not None else {}

    def title(n: str) -> str:
        if (source, n) not in titles:
            titles[source, n] = _title(root / source / n)
        return titles[source, n]

    i = names.index(name)
    parts = []
    if i > 0:
        parts.append(f"[← {title(names[i - 1])}]({names[i - 1]})")
    parts.append("[all lessons](../README.md#lessons)")
    if folder == "lessons":
        if (root / "solutions" / name).exists():
            parts.append(f"[exercise](../exercises/{name})")
    elif (root / "lessons" / name).exists():
        parts.append(f"[lesson](../lessons/{name})")
    if i + 1 < len(names):
        parts.append(f"[{title(names[i + 1])} →]({names[i + 1]})")
    return "---\n" + " · ".join(parts)


def install_line_repository(source: str) -> list[str]:
    """The repository URLs of the Colab install lines (``gradacc[...] @ git+URL``) in a cell's source."""
    return [m.group(2) for m in _INSTALL.finditer(source)]


def _markdown_cell(existing: list, cell_id: str, source: str):
    """The cell ``cell_id`` from ``existing`` (metadata kept) or a new one, as a markdown cell holding ``source``."""
    found = [c for c in existing if c.get("id") == cell_id]
    cell = found[0] if found else new_markdown_cell(source, id=cell_id)
    cell.cell_type = "markdown"
    cell.source = source
    for key in ("outputs", "execution_count"):
        cell.pop(key, None)
    return cell


def refresh_notebook(nb, repo: Repository, path: str, nav: str) -> nbformat.NotebookNode:
    """Put the badges (after the title cell) and the navigation (last cell) into ``nb``, in place, and point the
    Colab install line at ``repo``; returns ``nb``. Applying it twice gives the same notebook.

    Args:
        path: the notebook's path relative to the repository root, with ``/`` (what the badges open).
        nav: the navigation cell's source (``nav_markdown``).

    Raises:
        ValueError: the notebook has no cells, its first cell is not the markdown title, or it predates cell ids
            (nbformat < 4.5: re-save it with ``gradacc execute``).
    """
    if (nb.nbformat, nb.nbformat_minor) < (4, 5):
        raise ValueError(f"{path}: nbformat {nb.nbformat}.{nb.nbformat_minor} has no cell ids; re-save it as 4.5")
    body = [c for c in nb.cells if c.get("id") not in (BADGES_ID, NAV_ID)]
    if not body or body[0].cell_type != "markdown":
        raise ValueError(f"{path}: the first cell must be the markdown title '# NN · Topic'")
    badges = _markdown_cell(nb.cells, BADGES_ID, badges_markdown(repo, path))
    navigation = _markdown_cell(nb.cells, NAV_ID, nav)
    nb.cells = [body[0], badges, *body[1:], navigation]
    for cell in nb.cells:
        if cell.cell_type == "code" and _INSTALL.search(cell.source):
            cell.source = _INSTALL.sub(lambda m: m.group(1) + repo.url, cell.source)
    return nb


def retarget_badges(nb, folder: str) -> nbformat.NotebookNode:
    """Point the badges cell of ``nb`` (if any) at the same file name in ``folder``, in place; returns ``nb``.

    ``gradacc.course.notebooks.generate_exercise`` calls this with ``"exercises"``: a solution's badges open the solution,
    the exercise's must open the exercise. The repository and branch are read back from the cell's Colab link.

    Raises:
        ValueError: the badges cell has no Colab link to parse, or ``folder`` is not one of ``FOLDERS``.
    """
    if folder not in FOLDERS:
        raise ValueError(f"folder must be one of {FOLDERS}, got {folder!r}")
    for cell in nb.cells:
        if cell.get("id") != BADGES_ID:
            continue
        match = _COLAB_LINK.search(cell.source)
        if not match:
            raise ValueError(f"badges cell {BADGES_ID!r} has no Colab link to retarget; run `gradacc badges`")
        owner, name, branch, path = match.groups()
        repo = Repository(owner, name, unquote(branch))
        cell.source = badges_markdown(repo, f"{folder}/{path.rsplit('/', 1)[-1]}")
    return nb


def _dump(nb) -> str:
    return nbformat.writes(nb) + "\n"  # as gradacc.course.notebooks writes notebooks


def refresh_readme(text: str, repo: Repository, root: Path) -> str:
    """The README text with the Colab and Binder columns of the lesson table filled for every row whose lesson exists.

    The table is the one whose header row ends with the columns ``Colab`` and ``Binder``. A row's lesson is the
    ``lessons/NN_topic.ipynb`` it links to, else the ``lessons/NN_*.ipynb`` matching its first column; rows whose
    lesson does not exist (yet) get ``-``. A row that lacks the two badge columns gets them appended; rows with any
    other number of columns are left as they are (nothing else in the row is touched).
    """
    lines = text.split("\n")
    width = 0  # columns of the lesson table's header while inside it, else 0
    for i, line in enumerate(lines):
        if not line.lstrip().startswith("|"):
            width = 0
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[-2:] == ["Colab", "Binder"]:
            width = len(cells)
            continue
        if not width or set("".join(cells)) <= set("-: "):
            continue
        if len(cells) == width - 2:
            cells += ["", ""]
        elif len(cells) != width:
            continue
        linked = re.search(r"\((lessons/[^)\s]+\.ipynb)\)", line)
        path = linked.group(1) if linked else None
        if path is None and re.fullmatch(r"\d+", cells[0]):
            matches = sorted((root / "lessons").glob(f"{cells[0]}_*.ipynb"))
            path = f"lessons/{matches[0].name}" if matches else None
        exists = path is not None and (root / path).exists()
        cells[-2:] = [repo.colab_badge(path), repo.binder_badge(path)] if exists else ["-", "-"]
        lines[i] = "| " + " | ".join(cells) + " |"
    return "\n".join(lines)


def refresh_course(
    root: Path, repo: Repository, *, folders: tuple[str, ...] = FOLDERS, readme: bool = True, write: bool = True
) -> list[Path]:
    """Refresh badges, navigation and install lines in every ``root/<folder>/*.ipynb`` (and the README's table).

    Returns the files that changed (``write=True``) or would change (``write=False``: nothing is written). A file is
    written only when its content changes, so a second run returns ``[]``.
    """
    changed: list[Path] = []
    titles: dict = {}
    for folder in folders:
        for path in sorted((root / folder).glob("*.ipynb")):
            if path.name.startswith("."):
                continue
            original = nbformat.read(path, as_version=4)
            nav = nav_markdown(root, folder, path.name, titles)
            updated = refresh_notebook(copy.deepcopy(original), repo, f"{folder}/{path.name}", nav)
            if _dump(updated) != _dump(original):
                changed.append(path)
                if write:
                    path.write_text(_dump(updated), encoding="utf-8")
    readme_path = root / "README.md"
    if readme and readme_path.exists():
        text = readme_path.read_text(encoding="utf-8")
        new = refresh_readme(text, repo, root)
        if new != text:
            changed.append(readme_path)
            if write:
                readme_path.write_text(new, encoding="utf-8")
    return changed


def _cmd_badges(args: argparse.Namespace) -> int:
    root = Path(args.root)
    if not any((root / folder).is_dir() for folder in args.folders):
        print(f"error: no {'/, '.join(args.folders)}/ under {root}; run from the course's root folder", file=sys.stderr)
        return 2
    try:
        repo = read_repository(root / "pyproject.toml", repository=args.repository, branch=args.branch)
        changed = refresh_course(
            root, repo, folders=tuple(args.folders), readme=not args.no_readme, write=not args.check
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for path in changed:
        shown = path.relative_to(root) if path.is_relative_to(root) else path
        print(f"{'stale' if args.check else 'updated'}: {shown}")
    if args.check and changed:
        print("run `gradacc badges` (then `gradacc exercises`) to refresh them")
        return 1
    if not changed:
        print(f"badges and navigation are up to date ({repo.url}, branch {repo.branch})")
    return 0


def add_cli(subparsers) -> None:
    p = subparsers.add_parser(
        "badges",
        help="insert/refresh Colab + Binder badges and prev/next navigation in every notebook and the README table",
    )
    p.add_argument("--root", default=".", help="the course's root folder (default: the current folder)")
    p.add_argument("--repository", help="GitHub URL; default: [tool.gradacc] repository in ROOT/pyproject.toml")
    p.add_argument("--branch", help="branch the badges open; default: [tool.gradacc] branch, else main")
    p.add_argument(
        "--folders", nargs="+", default=list(FOLDERS), choices=FOLDERS, help="folders to refresh (default: all three)"
    )
    p.add_argument("--no-readme", action="store_true", help="leave README.md alone")
    p.add_argument("--check", action="store_true", help="write nothing; list stale files and exit 1 if there are any")
    p.set_defaults(func=_cmd_badges)
