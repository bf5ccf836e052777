"""Every source line the course cites (``file.py:N``, ``file.py:N-M``, a link's ``file.py#LN`` / ``#LN-LM``, and the
bare ``lines N-M`` / ``N-M in 5.15`` / `` `file.py` N-M`` that follow or name a file), checked against the library
version the citation names.

Where the citations are: the lessons' and solutions' cells (markdown and code, by cell id), ``docs/**/*.md``,
the package's and the hidden checks' source (``src/gradacc/**/*.py``, ``hidden/*.py``: docstrings and messages).
What they must say: ``tests/cited_lines.json``, one entry per citation: where it is, the citation as written, the
distribution, its version, the file inside the distribution, the line range, and the stripped text of those lines.

Three kinds of entry, by the version they name:

- the version installed in this environment (the course's pins): ``tests/test_cited_lines.py`` reads the installed
  file (``importlib.metadata``; nothing is imported) and compares the lines, so a pin bump that moves a cited line
  fails, naming the notebook, the cell and what the line holds now;
- Colab's version (``colab/requirements.txt``): the text stored in the table, copied from that release's wheel; the
  test fails when Colab's pin changes, ``tests/test_colab_replica.py`` compares every such line with the Colab
  replica's installed file (``check_colab``), and ``--check-downloads`` re-reads it from the release itself;
- any other release (a DeepSpeed tag, the graders' nbgrader and Otter, torch 2.11 where Colab's Python is not the
  point): the same, stored and re-read by ``--check-downloads``.

Commands (this file imports nothing from gradacc; run it with the course's Python)::

    python tests/cited_lines.py                  # list the problems, as the test does
    python tests/cited_lines.py --update-missing # add an entry for every new citation; never changes an entry
                                                 # (but records the pin of an entry at the installed version)
    python tests/cited_lines.py --remove-stale   # drop the entries of citations no longer in the text
    python tests/cited_lines.py --check-downloads [--cache DIR]   # re-read the other versions' lines from PyPI

``--update-missing`` guesses the distribution, the file and the version from the citation and the words around it
(``transformers 5.24``, ``in 5.15``, ``at v0.19.5``): read each new entry and check that the lines say what the
sentence claims before committing it. Taught nowhere; maintained with the lessons (tests/README.md).
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "tests" / "cited_lines.json"
COLAB_REQUIREMENTS = ROOT / "colab" / "requirements.txt"

# A citation with a file: ``path/file.py:N`` or ``:N-M`` (the path may be a bare file name).
PRIMARY = re.compile(r"(?<![\w/.])((?:[\w.-]+/)*[\w.-]+\.py):(\d+)(?:-(\d+))?(?!\d)")
# The same as a link to a line: ``trainer.py#L2214``, ``.../blob/v5.24.0/src/transformers/trainer.py#L2214-L2216``.
ANCHOR = re.compile(r"(?<![\w.])((?:[\w.-]+/)*[\w.-]+\.py)#L(\d+)(?:-L?(\d+))?(?!\d)")
_RANGE = r"\d+(?:-\d+)?"
_LIST = rf"{_RANGE}(?:(?:,\s+and\s+|,\s+|\s+and\s+){_RANGE})*"
# The bare line numbers that follow one: "lines 162-175 and 188-190", "(line 402)", "`195-197`" (a leading 0 is a file mode: `0600`),
# "2040-2050 in 5.15", "193, 507 and 529 in 2.11", "2045-2050 at tag v0.18.2", "`x.py:1205` and 1210".
SECONDARY = [
    re.compile(rf"\blines?\s+({_LIST})"),
    re.compile(r"`+([1-9]\d*-\d+|[1-9]\d{2,})`+"),  # not a file mode: `0600`
    re.compile(rf"(?<![#\w.,-])({_LIST})\s+(?:in|at)\s+(?:tag\s+)?(?:[A-Za-z-]+\s+)?v?\d+\.\d+"),
    re.compile(rf"\.py:{_RANGE}`+,?\s+(?:and\s+)?({_LIST})(?![\w.])"),
    # "`_accumulation.py` 380-390", not "`test_site.py` 52-63 s of CPU"
    re.compile(rf"\.py`+\s+({_LIST})(?![\w.-]|\s*(?:s|ms|min|%|[KMG]iB)\b)"),
]
# The distributions a citation's file can live in, and the top-level package each installs.
DISTRIBUTIONS = {
    "transformers": "transformers",
    "torch": "torch",
    "accelerate": "accelerate",
    "optax": "optax",
    "trl": "trl",
    "peft": "peft",
    "keras": "keras",
    "pytorch-lightning": "pytorch_lightning",
    "deepspeed": "deepspeed",
    "nbgrader": "nbgrader",
    "otter-grader": "otter",
    "jax": "jax",
}
# Words that name a distribution in prose ("Accelerate 1.15", "pytorch-lightning 2.6.6", "Otter-Grader 7.0.0").
NAMES = {
    "transformers": "transformers",
    "torch": "torch",
    "pytorch": "torch",
    "accelerate": "accelerate",
    "optax": "optax",
    "trl": "trl",
    "peft": "peft",
    "keras": "keras",
    "pytorch-lightning": "pytorch-lightning",
    "lightning": "pytorch-lightning",
    "deepspeed": "deepspeed",
    "nbgrader": "nbgrader",
    "otter-grader": "otter-grader",
    "jax": "jax",
}


@dataclass(frozen=True)
class Citation:
    where: str  # "lessons/05_trainer.ipynb#trainer-20" or "src/gradacc/stacks/sft.py"
    cite: str  # as written: "transformers/trainer.py:2175-2185", or a bare "2114-2117"
    path: str | None  # the file as written (None for a bare range)
    lines: tuple[int, int]
    start: int  # offset in the unit's text


def units() -> list[tuple[str, str]]:
    """``(where, text)`` for every cell of lessons/ and solutions/, every docs/ page, every package source file."""
    found = []
    for folder in ("lessons", "solutions"):
        for notebook in sorted((ROOT / folder).glob("*.ipynb")):
            cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
            for cell in cells:
                source = cell["source"]
                text = source if isinstance(source, str) else "".join(source)
                found.append((f"{folder}/{notebook.name}#{cell.get('id')}", text))
    paths = sorted((ROOT / "docs").rglob("*.md")) + sorted((ROOT / "src" / "gradacc").rglob("*.py"))
    paths += sorted((ROOT / "hidden").glob("*.py")) + [ROOT / "README.md"]
    for path in paths:
        found.append((path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8")))
    return found


def _ranges(listed: str) -> list[tuple[str, tuple[int, int]]]:
    out = []
    for token in re.findall(_RANGE, listed):
        a, _, b = token.partition("-")
        out.append((token, (int(a), int(b or a))))
    return out


def find_citations(where: str, text: str) -> list[Citation]:
    """Every citation in one unit: the files' (``x.py:N``) and the bare ranges that follow them."""
    found = {}
    for m in [*PRIMARY.finditer(text), *ANCHOR.finditer(text)]:
        a, b = int(m.group(2)), int(m.group(3) or m.group(2))
        cite = m.group(0)
        path = re.sub(r"^.*?/blob/[^/]+/(?:src/)?", "", m.group(1))  # a GitHub link: the file inside the package
        found.setdefault((cite, m.start()), Citation(where, cite, path, (a, b), m.start()))
    spans = [(c.start, c.start + len(c.cite)) for c in found.values()]
    for pattern in SECONDARY:
        for m in pattern.finditer(text):
            offset = m.start(1)
            for token, lines in _ranges(m.group(1)):
                start = text.index(token, offset)
                offset = start + len(token)
                if any(s <= start < e for s, e in spans):
                    continue  # part of a "file.py:N-M" already found
                found.setdefault((token, start), Citation(where, token, None, lines, start))
    return sorted(found.values(), key=lambda c: c.start)


def all_citations() -> list[Citation]:
    return [c for where, text in units() for c in find_citations(where, text)]


def load_table() -> dict:
    return json.loads(TABLE.read_text(encoding="utf-8"))


def save_table(table: dict) -> None:
    table["entries"].sort(key=lambda e: (e["where"], e["cite"], e["file"], e["lines"]))
    TABLE.write_text(json.dumps(table, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def colab_pins() -> dict[str, str]:
    pins = {}
    for line in COLAB_REQUIREMENTS.read_text().splitlines():
        line = line.split("#")[0].strip()
        if "==" in line:
            name, _, version = line.partition("==")
            pins[name.strip().lower()] = version.strip()
    return pins


def installed_version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _bare(version: str | None) -> str:
    return (version or "").split("+")[0]  # "2.13.0+cpu" -> "2.13.0"


def _pin(dist: str) -> str:
    return _bare(installed_version(dist))


def kind_of(entry: dict) -> str:
    """``installed`` (checked live), ``colab`` (Colab's pin), ``pin moved`` (written at the course's pin, which is no
    longer the installed version) or ``stored`` (another release)."""
    if _bare(installed_version(entry["dist"])) == entry["version"]:
        return "installed"
    if entry.get("colab"):
        return "colab"
    if entry.get("pinned_then") == entry["version"]:
        return "pin moved"
    return "stored"


def read_lines(root: Path, file: str, lines: list[int]) -> list[str] | None:
    path = root / file
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8", errors="replace").splitlines()
    a, b = lines
    if b > len(text):
        return None
    return [line.strip() for line in text[a - 1 : b]]


def installed_root(dist: str) -> Path:
    return Path(str(metadata.distribution(dist).locate_file("")))


def _key(entry: dict) -> tuple[str, str]:
    return entry["where"], entry["cite"]


def _fmt(entry: dict) -> str:
    return json.dumps(entry, ensure_ascii=False)


def problems(citations: list[Citation] | None = None, table: dict | None = None) -> list[str]:
    """What the test reports: citations without an entry, entries without a citation, lines that say something else."""
    citations = all_citations() if citations is None else citations
    table = load_table() if table is None else table
    pins = colab_pins()
    out = []
    moved: dict[tuple[str, str], list[dict]] = {}  # (dist, the pin the entries were written at): those entries
    entries = table["entries"]
    keys = {_key(e) for e in entries}
    ignored = {_key(e) for e in table.get("not_citations", [])}
    cited = {(c.where, c.cite) for c in citations}
    for e in table.get("not_citations", []):
        if _key(e) not in cited:
            out.append(
                f"{_place(e['where'])}: tests/cited_lines.json's not_citations lists `{e['cite']}`, no longer "
                "in the text: remove it"
            )
    for c in citations:
        if (c.where, c.cite) in ignored:
            continue
        if (c.where, c.cite) not in keys:
            guess = guess_entry(c)
            out.append(
                f"{_place(c.where)}: the citation `{c.cite}` has no entry in tests/cited_lines.json. Check that the "
                f"lines say what the sentence claims, then add (python tests/cited_lines.py --update-missing writes "
                f"it):\n  {_fmt(guess)}"
            )
    for e in entries:
        if _key(e) not in cited:
            out.append(
                f"{_place(e['where'])}: tests/cited_lines.json has `{e['cite']}` ({e['file']}, {e['dist']} "
                f"{e['version']}) but the text no longer cites it: remove the entry or restore the citation"
            )
            continue
        label = f"{_place(e['where'])}: `{e['cite']}` ({e['dist']} {e['version']}, {e['file']}:{_span(e)})"
        if not e.get("text"):
            out.append(f"{label}: the entry has no text; run --update-missing with --cache (the release's source)")
            continue
        if installed_version(e["dist"]) and not e.get("pinned_then"):
            out.append(
                f'{label}: the entry records no pin: add "pinned_then": "{_bare(installed_version(e["dist"]))}" '
                "(the course's pinned version when the entry was written; for an entry at that version, its version: "
                "--update-missing records it)"
            )
            continue
        kind = kind_of(e)
        if kind == "installed":
            now = read_lines(installed_root(e["dist"]), e["file"], e["lines"])
            if now is None:
                out.append(f"{label}: the installed {e['dist']} has no such file or lines")
            elif now != e["text"]:
                out.append(f"{label}: the lines changed.\n{_diff(e['text'], now, e['lines'][0])}")
        elif kind == "colab":
            if pins.get(e["dist"]) != e["version"]:
                out.append(
                    f"{label}: the entry is for Colab's {e['dist']} {e['version']}, but colab/requirements.txt now "
                    f"pins {pins.get(e['dist'])}: re-read the lines in that release (--check-downloads) and update "
                    "the text, the entry and the sentence"
                )
        elif kind == "pin moved":
            moved.setdefault((e["dist"], e["version"]), []).append(e)
        else:
            pinned = installed_version(e["dist"])
            if pinned and e.get("pinned_then") and _bare(pinned) != e["pinned_then"]:
                out.append(
                    f"{label}: the entry was written with the pinned {e['dist']} {e['pinned_then']}; "
                    f"the pin is now {pinned}: check whether the sentence still names the right version"
                )
    for (dist, version), group in sorted(moved.items()):
        out.append(_pin_moved(dist, version, group))
    return out


def _pin_moved(dist: str, version: str, group: list[dict]) -> str:
    """One problem for every line cited at a pin that moved: each line, and where its recorded text is now."""
    now = _bare(installed_version(dist)) or None
    rows = []
    for e in group:
        where = "its text is not in the installed file" if now else f"{dist} is not installed"
        if now:
            found = find_block(installed_root(dist), e["file"], e["text"])
            if len(found) == 1:
                a = found[0]
                where = (
                    f"the text is now at {a}"
                    if len(e["text"]) == 1
                    else f"the text is now at {a}-{a + len(e['text']) - 1}"
                )
            elif found:
                where = f"its text is found at {len(found)} places"
        rows.append(f"  - {_place(e['where'])}: `{e['cite']}` ({e['file']}:{_span(e)}; {where})")
    return (
        f"{dist}: the pin moved from {version} to {now or 'nothing installed'}: re-read these {len(group)} lines in "
        f"{dist} {now}. For each, update the sentence's citation and the entry (lines, text, version and pinned_then "
        f"{now}); where the sentence names {version} on purpose, keep the version and set pinned_then to {now}.\n"
        + "\n".join(rows)
    )


@functools.lru_cache(maxsize=64)
def _stripped(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text(encoding="utf-8", errors="replace").splitlines()]


def find_block(root: Path, file: str, text: list[str]) -> list[int]:
    """The first line numbers at which ``file`` holds the stripped lines ``text`` (every place)."""
    path = root / file
    if not path.is_file() or not text:
        return []
    lines = _stripped(path)
    n = len(text)
    return [i + 1 for i in range(len(lines) - n + 1) if lines[i] == text[0] and lines[i : i + n] == text]


def _span(e: dict) -> str:
    a, b = e["lines"]
    return str(a) if a == b else f"{a}-{b}"


def _place(where: str) -> str:
    path, _, cell = where.partition("#")
    return f"{path}, cell {cell}" if cell else path


def _diff(expected: list[str], now: list[str], first: int) -> str:
    rows = []
    for i, (want, got) in enumerate(zip(expected, now, strict=True)):
        if want != got:
            rows.append(f"  line {first + i}: expected {want!r}\n  {' ' * len(str(first + i))}       now      {got!r}")
    return "\n".join(rows[:6]) + ("\n  ..." if len(rows) > 6 else "")


# ---------------------------------------------------------------- guessing a new entry (--update-missing)

_VERSION_AFTER = re.compile(
    r"^[^();]{0,80}?\b(?:(?P<name>[A-Za-z][\w-]*)\s+|at\s+(?:tag\s+)?|in\s+)v?(?P<version>\d+\.\d+(?:\.\d+)?)"
)
_VERSION_BEFORE = re.compile(r"(?P<version>\d+\.\d+(?:\.\d+)?),?(?: Colab's)? `*$")


def _version_near(text: str, c: Citation) -> tuple[str | None, str | None]:
    """The distribution and version named next to a citation: "x.py:N`, torch 2.13", "5.15.0 `x.py:N`", "N in 2.11"."""
    after = text[c.start + len(c.cite) : c.start + len(c.cite) + 120].lstrip("`")
    m = _VERSION_AFTER.match(after)
    if m:
        name = (m.group("name") or "").lower()
        return NAMES.get(name), m.group("version")
    m = _VERSION_BEFORE.search(text[max(0, c.start - 20) : c.start])
    if m:
        return None, m.group("version")
    return None, None


def _candidates(dist: str, path: str, root: Path) -> list[str]:
    top = DISTRIBUTIONS[dist]
    files = [p.relative_to(root).as_posix() for p in (root / top).rglob(Path(path).name)]
    return [f for f in files if f == path or f.endswith("/" + path)]


def _installed_home(path: str, text: str) -> str | None:
    """The installed distribution holding a file that ends with ``path``, those named in ``text`` first."""
    words = re.findall(r"[A-Za-z][\w-]*", text.lower())
    named = [NAMES[w] for w in words if w in NAMES]
    order = list(dict.fromkeys(named + list(DISTRIBUTIONS)))
    for dist in order:
        if installed_version(dist) and _candidates(dist, path, installed_root(dist)):
            return dist
    return None


def guess_entry(c: Citation, cache: Path | None = None, previous: dict | None = None) -> dict:
    """An entry for a citation: the distribution and file from its path, the version named beside it."""
    text = dict(units()).get(c.where, "") if previous is None else previous.get("_text", "")
    dist, version = _version_near(text, c)
    tag = re.search(r"/blob/v?(\d+\.\d+(?:\.\d+)?)/", c.cite)  # a GitHub link names its release
    version = tag.group(1) if tag else version
    path = c.path
    named = re.findall(r"`+((?:[\w.-]+/)*[\w.-]+\.py)`+", text[max(0, c.start - 90) : c.start])
    if path is None and named:
        path = named[-1]
    elif path is None and previous:
        path = previous.get("file")
        dist = dist or previous.get("dist")
    if dist is None and path:
        first = path.split("/")[0]
        dist = next((d for d, top in DISTRIBUTIONS.items() if top == first), None)
    if dist is None and path:
        dist = _installed_home(path, text)
    if dist is None and previous:
        dist = previous.get("dist")
    entry = {"where": c.where, "cite": c.cite, "dist": dist, "version": None, "file": path, "lines": list(c.lines)}
    if dist is None:
        return entry
    pins = colab_pins()
    installed = (installed_version(dist) or "").split("+")[0]
    full = installed
    if version:
        for candidate in (installed, pins.get(dist, "")):
            if candidate == version or candidate.startswith(version + "."):
                full = candidate
                break
        else:
            full = version
    entry["version"] = full
    if full == pins.get(dist) and full != installed:
        entry["colab"] = True
    if installed:
        entry["pinned_then"] = installed  # the course's pin when written: a pin bump then fails (problems())
    root = None
    if full and full == installed:
        root = installed_root(dist)
    elif full and cache is not None:
        try:
            root = release_source(dist, full, cache)
        except (subprocess.CalledProcessError, StopIteration):
            root = None  # no such release: the version was guessed wrong
    if root is not None and path is not None:
        matches = _candidates(dist, path, root) if not (root / path).is_file() else [path]
        if len(matches) == 1:
            entry["file"] = matches[0]
            entry["text"] = read_lines(root, matches[0], entry["lines"])
        else:
            entry["file_candidates"] = matches[:10]
    return entry


def update_missing(cache: Path | None) -> list[dict]:
    table = load_table()
    keys = {_key(e) for e in table["entries"]}
    added = []
    ignored = {_key(e) for e in table.get("not_citations", [])}
    for where, text in units():
        previous = None
        for c in find_citations(where, text):
            if (c.where, c.cite) in ignored:
                continue
            known = next((e for e in table["entries"] if _key(e) == (c.where, c.cite)), None)
            if known is None:
                entry = guess_entry(c, cache, {**(previous or {}), "_text": text})
                if (c.where, c.cite) not in keys:
                    table["entries"].append(entry)
                    keys.add((c.where, c.cite))
                    added.append(entry)
                known = entry
            elif not known.get("pinned_then") and known.get("dist") and _pin(known["dist"]) == known.get("version"):
                known["pinned_then"] = known["version"]  # an entry at the pin written before pins were recorded
                added.append(known)
            elif not known.get("text") and known.get("dist") and known.get("version") and known.get("file"):
                known["text"] = _text_of(known, cache)  # an entry written without its release's source: fill it in
                if known["text"]:
                    added.append(known)
            if c.path is not None:
                previous = known
    save_table(table)
    return added


def _text_of(entry: dict, cache: Path | None) -> list[str] | None:
    if kind_of(entry) == "installed":
        return read_lines(installed_root(entry["dist"]), entry["file"], entry["lines"])
    if cache is None:
        return None
    try:
        return read_lines(release_source(entry["dist"], entry["version"], cache), entry["file"], entry["lines"])
    except (subprocess.CalledProcessError, StopIteration):
        return None


def remove_stale() -> list[dict]:
    """Drop the entries (and not_citations) whose citation is no longer in the text; return the entries dropped."""
    table = load_table()
    cited = {(c.where, c.cite) for c in all_citations()}
    gone = [e for e in table["entries"] if _key(e) not in cited]
    table["entries"] = [e for e in table["entries"] if _key(e) in cited]
    table["not_citations"] = [e for e in table.get("not_citations", []) if _key(e) in cited]
    save_table(table)
    return gone


# ---------------------------------------------------------------- other releases (--check-downloads)


def release_source(dist: str, version: str, cache: Path) -> Path:
    """A folder holding ``dist==version``'s files as installed (wheel) or as released (sdist), from PyPI."""
    folder = cache / f"{dist}=={version}"
    unpacked = folder / "src"
    if unpacked.is_dir():
        return unpacked
    folder.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(folder), f"{dist}=={version}"]
    if dist == "deepspeed":
        command[5:5] = ["--no-binary", ":all:"]  # DeepSpeed publishes an sdist only
    elif dist == "torch":
        command[5:5] = ["--only-binary", ":all:", "--platform", "manylinux_2_28_x86_64", "--python-version", "3.11"]
    subprocess.run(command, check=True)
    archive = next(p for p in folder.iterdir() if p.is_file())
    unpacked.mkdir()
    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as wheel:
            wheel.extractall(unpacked)
    else:
        subprocess.run(["tar", "-xzf", str(archive), "-C", str(unpacked), "--strip-components=1"], check=True)
    return unpacked


def check_downloads(cache: Path) -> list[str]:
    out = []
    for e in load_table()["entries"]:
        if kind_of(e) == "installed":
            continue
        now = read_lines(release_source(e["dist"], e["version"], cache), e["file"], e["lines"])
        if now != e["text"]:
            shown = _diff(e["text"], now, e["lines"][0]) if now and e["text"] else now
            out.append(f"{_place(e['where'])}: `{e['cite']}` ({e['dist']} {e['version']}, {e['file']}): {shown}")
    return out


def check_colab(site: Path) -> list[str]:
    """The entries for Colab's versions against an environment that has them installed (the Colab replica's
    ``site-packages``, ``tests/test_colab_replica.py``): what a Colab learner's library holds at those lines."""
    out = []
    for e in load_table()["entries"]:
        if not e.get("colab"):
            continue
        stem = e["dist"].replace("-", "_")
        versions = {p.name[len(stem) + 1 : -len(".dist-info")].split("+")[0] for p in site.glob(f"{stem}-*.dist-info")}
        label = f"{_place(e['where'])}: `{e['cite']}` ({e['dist']} {e['version']}, {e['file']}:{_span(e)})"
        if e["version"] not in versions:
            out.append(f"{label}: {site} holds {e['dist']} {sorted(versions) or 'nowhere'}, not Colab's {e['version']}")
            continue
        now = read_lines(site, e["file"], e["lines"])
        if now is None:
            out.append(f"{label}: {site} has no such file or lines")
        elif now != e["text"]:
            out.append(f"{label}: the lines differ in Colab's installed copy.\n{_diff(e['text'], now, e['lines'][0])}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--update-missing", action="store_true", help="add entries for new citations")
    parser.add_argument("--remove-stale", action="store_true", help="drop entries whose citation is gone")
    parser.add_argument("--check-downloads", action="store_true", help="re-read the other releases' lines (PyPI)")
    parser.add_argument("--cache", type=Path, default=None, help="where releases are downloaded and unpacked")
    args = parser.parse_args(argv)
    if args.update_missing:
        for entry in update_missing(args.cache):
            print("added or completed:", _fmt(entry))
    if args.remove_stale:
        for entry in remove_stale():
            print("removed:", _fmt(entry))
    if args.check_downloads:
        found = check_downloads(args.cache or Path("/tmp/cited_lines_cache"))
        print("\n".join(found) or "every stored line matches its release")
        return 1 if found else 0
    found = problems()
    print("\n\n".join(found) or f"{len(load_table()['entries'])} cited lines hold")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
