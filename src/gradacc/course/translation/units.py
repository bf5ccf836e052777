"""Translatable units: a document cut into segments, the units a translator translates and the text kept as it is.

* **Markdown** (a markdown cell, a page): each paragraph and heading, at any depth, and each table row is a unit, in
  whole lines (a list item's paragraph starts with the item's marker, a quote's with ``>``). Blocks are found by
  markdown-it-py (CommonMark, with tables), so code fences, HTML blocks, rules and blank lines stay as they are; the
  ``#`` comments inside a ``python`` or ``bash`` fence are units too (below). A block with no word outside code spans,
  math and links (a formula on its own, a row of badges) is kept.
* **Code** (a code cell, a fence): each ``#`` comment is a unit, found by Python's ``tokenize`` (a ``#`` inside a string
  is not a comment), except the markers tools read (``# noqa``, ``# NBVAL_...``, ``### BEGIN SOLUTION``, ...).
  Comment lines that follow each other at the same indentation are one unit, one line of text per comment line;
  a comment after code on the same line is a unit of one line.

Joining the segments of a document gives it back byte for byte; ``join`` with translations puts them in place.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass

from markdown_it import MarkdownIt

__all__ = ["Segment", "markdown_segments", "code_segments", "join", "strip_comments", "has_words"]

# comments that tools read, never translated
_MARKERS = re.compile(
    r"^#+\s*(noqa|type:|fmt:|pragma|pylint|NBVAL_|BEGIN SOLUTION|END SOLUTION|YOUR CODE HERE|ruff|isort|SBATCH)|^#!",
    re.I,
)
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
_MATH = re.compile(r"\$\$.+?\$\$|\$[^$\n]+\$", re.S)
_LINK_TARGET = re.compile(r"\]\([^)\s]*\)|<https?://[^>]+>|https?://[^\s)>\]]+|<[^>\n]+>")
_COMMENT_FENCES = {"python": "python", "py": "python", "ipython": "python", "bash": "shell", "sh": "shell",
                   "shell": "shell", "console": "shell"}  # fmt: skip


@dataclass(frozen=True)
class Segment:
    """A piece of a document: ``text`` kept as it is (``kind`` ``"keep"``) or a unit to translate: ``"markdown"``, or
    ``"comment"`` (the comment's text without its marker, one line per comment line).

    For a comment: ``marker`` is what precedes its text on each line (``# ``), ``indent`` what precedes the marker on
    its second and later lines, and ``single`` says it follows code, so its translation stays on one line."""

    kind: str
    text: str
    marker: str = ""
    indent: str = ""
    single: bool = False


def has_words(text: str) -> bool:
    """Whether ``text`` holds a word (2+ letters) outside code spans, math, link targets and URLs."""
    bare = _LINK_TARGET.sub(" ", _MATH.sub(" ", _CODE_SPAN.sub(" ", text)))
    return re.search(r"[^\W\d_]{2,}", bare) is not None


def _keep(out: list[Segment], text: str) -> None:
    if not text:
        return
    if out and out[-1].kind == "keep":
        out[-1] = Segment("keep", out[-1].text + text)
    else:
        out.append(Segment("keep", text))


def _unit(out: list[Segment], text: str) -> None:
    """``text`` (whole lines) as a markdown unit, its trailing blank lines and last newline kept outside it."""
    body = text.rstrip("\n")
    stripped = body.rstrip()
    if not has_words(stripped):
        _keep(out, text)
        return
    out.append(Segment("markdown", stripped))
    _keep(out, text[len(stripped) :])


_md = MarkdownIt("commonmark").enable("table")


def markdown_segments(source: str) -> list[Segment]:
    """The segments of a markdown text (a cell's source or a page); ``join`` of them is ``source``.

    Units are whole lines: each paragraph and heading at any depth (a list item's paragraph starts with the item's
    marker, a quote's with ``>``) and each table row; the comments of a python or bash fence are units too.
    """
    lines = source.splitlines(keepends=True)
    ranges = []  # (first line, end line, "unit" or the fence's language)
    for token in _md.parse(source):
        if token.map is None or token.nesting == -1:
            continue
        if token.type in ("paragraph_open", "heading_open", "tr_open"):
            ranges.append((*token.map, "unit"))
        elif token.type == "fence":
            ranges.append((*token.map, (token.info.strip().split(" ") or [""])[0].lower()))
    out: list[Segment] = []
    done = 0
    for start, end, kind in sorted(ranges):
        _keep(out, "".join(lines[done:start]))
        if kind == "unit":
            _unit(out, "".join(lines[start:end]))
        elif kind in _COMMENT_FENCES:  # a python or bash fence: its comments
            body = lines[start + 1 : end]
            closed = bool(body) and body[-1].strip()[:3] in ("```", "~~~")
            _keep(out, lines[start])
            code = "".join(body[:-1] if closed else body)
            try:
                segments = code_segments(code, _COMMENT_FENCES[kind])
            except ValueError:  # a fence that is no valid Python on its own (indented in a list, a fragment)
                segments = code_segments(code, "shell")
            for seg in segments:
                if seg.kind == "keep":
                    _keep(out, seg.text)
                else:
                    out.append(seg)
            _keep(out, body[-1] if closed else "")
        else:
            _keep(out, "".join(lines[start:end]))
        done = end
    _keep(out, "".join(lines[done:]))
    return out


def _split_comment(token_text: str) -> tuple[str, str]:
    marker = re.match(r"#+\s?", token_text).group(0)
    return marker, token_text[len(marker) :]


def _python_comments(source: str) -> list[tuple[int, int, str]]:
    """``(row, column, text)`` of every comment of Python ``source`` (rows from 0)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError) as exc:
        raise ValueError(f"cannot read the comments of this code (tokenize: {exc}):\n{source[:300]}") from exc
    return [(t.start[0] - 1, t.start[1], t.string) for t in tokens if t.type == tokenize.COMMENT]


def _shell_comments(source: str) -> list[tuple[int, int, str]]:
    """``(row, column, text)`` of the comments of shell ``source``: a ``#`` at a line's start or after a blank."""
    found = []
    for row, line in enumerate(source.split("\n")):
        match = re.search(r"(^|\s)(#.*)$", line)
        if match:
            found.append((row, match.start(2), match.group(2)))
    return found


def code_segments(source: str, language: str = "python") -> list[Segment]:
    """The segments of code: the code kept, and its comments as units (``language``: ``python`` or ``shell``).

    Raises:
        ValueError: Python code that ``tokenize`` cannot read.
    """
    comments = [
        c
        for c in (_python_comments(source) if language == "python" else _shell_comments(source))
        if not _MARKERS.match(c[2]) and has_words(c[2])
    ]
    lines = source.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    out: list[Segment] = []
    pos, k = 0, 0  # pos: offset in source up to which segments are made
    while k < len(comments):
        row, col, text = comments[k]
        marker = _split_comment(text)[0]
        alone = not lines[row][:col].strip()
        group = [comments[k]]
        k += 1
        while alone and k < len(comments):  # the next lines' comments at the same column, alone on their line
            nrow, ncol, ntext = comments[k]
            if (
                (nrow, ncol) != (group[-1][0] + 1, col)
                or lines[nrow][:ncol].strip()
                or _split_comment(ntext)[0] != marker
            ):
                break
            group.append(comments[k])
            k += 1
        _keep(out, source[pos : offsets[row] + col])
        texts = "\n".join(_split_comment(t)[1] for _, _, t in group)
        out.append(Segment("comment", texts, marker=marker, indent=lines[row][:col] if alone else "", single=not alone))
        last_row, last_col, last_text = group[-1]
        pos = offsets[last_row] + last_col + len(last_text)
    _keep(out, source[pos:])
    return out


def join(segments: list[Segment], translate=None) -> str:
    """The document from its segments; ``translate(segment) -> str`` gives each unit's text (default: its own).

    Raises:
        ValueError: the translation of a comment that follows code spans several lines.
    """
    parts = []
    for seg in segments:
        if seg.kind == "keep":
            parts.append(seg.text)
            continue
        text = seg.text if translate is None else translate(seg)
        if seg.kind == "comment":
            if seg.single and "\n" in text:
                raise ValueError(f"the comment {seg.text!r} follows code: translate it on one line, got {text!r}")
            text = f"\n{seg.indent}".join(seg.marker + line for line in text.split("\n"))
        parts.append(text)
    return "".join(parts)


def strip_comments(source: str) -> str:
    """Python ``source`` without its comments and without the lines only comments held (trailing spaces removed):
    what a translation may not change in a code cell."""
    lines = source.split("\n")
    for row, col, _text in reversed(_python_comments(source)):
        lines[row] = lines[row][:col].rstrip()
    return "\n".join(line for line in lines if line.strip())
