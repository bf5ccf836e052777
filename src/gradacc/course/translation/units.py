"""Translatable units: a document cut into segments, the units a translator translates and the text kept as it is.

* **Markdown** (a markdown cell, a page): each paragraph and heading, at any depth, and each table row is a unit, in
  whole lines (a list item's paragraph starts with the item's marker, a quote's with ``>``). Blocks are found by
  markdown-it-py (CommonMark, with tables), so code fences, HTML blocks, rules and blank lines stay as they are; the
  ``#`` comments inside a ``python`` or ``bash`` fence are units too (below). A block with no word outside code spans,
  math and links (a formula on its own, a row of badges) is kept.
* **Code** (a code cell, a fence): each ``#`` comment is a unit, found by Python's ``tokenize`` (a ``#`` inside a string
  is not a comment), except the markers tools read (``# noqa``, ``# NBVAL_...``, ``### BEGIN SOLUTION``, ...); the text
  after a ``# noqa: E731`` directive (``# noqa: E731  one hidden layer's keep-mask``) is a unit, the directive kept.
  Comment lines that follow each other at the same indentation are one unit, one line of text per comment line;
  a comment after code on the same line is a unit of one line.
* **What code shows** (a code cell only, ``strings=True``): each string literal with a word that the learner reads
  when the cell runs or when reading the code (``display_strings``): the arguments of ``print`` and of the figure's
  text calls (``set_title``, ``xlabel``, ``legend``, ``label=``, ...), the message of ``raise``/``assert``/``warn``,
  the labels of a literal a ``for`` loop walks (``for name, fn in [("plain mean", ...)]``), a string assigned to a
  name that only shown f-strings use (``where = "every micro-batch" if ... else "at the boundary"``), the strings
  appended to a list a display call shows, the sentences (two words) of a literal walked by a loop whose variable a
  display call shows (``for x, y, text, colour in boxes.values(): ax.text(x, y, text)``), a sentence passed to a
  function whose result is shown, or assigned to a name a display call shows
  (``print(smallest_n_line("the T4 at its usable 14.75 GiB:", ...))``), and docstrings; but not a string the cell
  also writes elsewhere (a key, a value compared: ``if logging == "window sum"``), nor one that reads as code. The unit
  is the literal's text between its quotes, as written (an f-string's ``{fields}`` and escapes like ``\\n`` are part
  of it and stay as they are); the prefix and quotes are kept. The edition's build puts the translated literal in the
  pt-BR code and translates the stored outputs it printed (``edition.LiteralTemplate``).

Joining the segments of a document gives it back byte for byte; ``join`` with translations puts them in place.
"""

from __future__ import annotations

import ast
import functools
import io
import re
import tokenize
from dataclasses import dataclass

from markdown_it import MarkdownIt

__all__ = [
    "Segment",
    "markdown_segments",
    "code_segments",
    "join",
    "strip_comments",
    "strip_code_text",
    "has_words",
    "display_strings",
    "string_fields",
    "field_key",
    "DISPLAY_CALLS",
    "DISPLAY_KEYWORDS",
]

# comments that tools read, never translated
_MARKERS = re.compile(
    r"^#+\s*(noqa|type:|fmt:|pragma|pylint|NBVAL_|BEGIN SOLUTION|END SOLUTION|YOUR CODE HERE|ruff|isort|SBATCH)|^#!",
    re.I,
)
_NOQA_TEXT = re.compile(r"^(#+\s*noqa(?::\s*[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*)?\s+)(\S.*)$")
"""A ``# noqa`` directive followed by words: the directive is the unit's marker, the words its text."""
DISPLAY_CALLS = frozenset(
    {
        "print", "display", "Markdown", "warn",
        # matplotlib: what a figure draws as text
        "title", "set_title", "suptitle", "xlabel", "ylabel", "set_xlabel", "set_ylabel", "text", "figtext",
        "annotate", "legend", "set_label", "bar_label", "supxlabel", "supylabel",
    }
)  # fmt: skip
"""Calls whose string arguments the learner reads (printed, or drawn on a figure)."""
DISPLAY_KEYWORDS = frozenset({"label", "title", "xlabel", "ylabel", "suptitle", "labels", "description"})
"""Keyword arguments of any call whose strings are drawn or shown (``ax.plot(x, y, label="peak")``)."""
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
    end: str = ""
    """A string's closing quotes (``marker`` is its prefix and opening quotes: ``f"``)."""


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
    noqa = _NOQA_TEXT.match(token_text)
    if noqa:
        return noqa.group(1), noqa.group(2)
    marker = re.match(r"#+\s?", token_text).group(0)
    return marker, token_text[len(marker) :]


def _is_marker(text: str) -> bool:
    """A comment that tools read and that carries no words of its own (``# noqa: E731`` alone)."""
    return bool(_MARKERS.match(text)) and not _NOQA_TEXT.match(text)


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


_PREFIX = re.compile(r"^([A-Za-z]*)(\"\"\"|\'\'\'|\"|\')")
_PROSE = re.compile(r"[^\W\d_]{2,}[ :,;]+[^\W\d_]{2,}")
"""Two words in a row (a blank, colon, comma or semicolon between): a sentence, not an identifier or a key."""
_CODE_LIKE = re.compile(r"[\w\]]\(|^\s*(raise|return|import|from|def|class|lambda)\b")
"""A string that is code (``"raise NotImplementedError()"``): never a sentence, wherever it is passed."""
_SKIPPED_CALLS = frozenset({"format", "join", "str", "repr"})
"""Calls inside a display call whose strings are still shown (``print(", ".join(...))``, ``"{} MiB".format(x)``)."""


def _python_strings(source: str) -> list[tuple[int, int, int, int, str]]:
    """``(row, column, end row, end column, text)`` of every string literal token of Python ``source`` (rows from 0);
    an f-string is one token (Python 3.12 splits it into parts: they are joined back)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError) as exc:
        raise ValueError(f"cannot read the strings of this code (tokenize: {exc}):\n{source[:300]}") from exc
    fstart, fend = getattr(tokenize, "FSTRING_START", None), getattr(tokenize, "FSTRING_END", None)
    found, depth, begin = [], 0, None
    for t in tokens:
        if fstart is not None and t.type == fstart:
            depth, begin = depth + 1, begin or t.start
        elif fend is not None and t.type == fend:
            depth -= 1
            if depth == 0:
                found.append((begin[0] - 1, begin[1], t.end[0] - 1, t.end[1], ""))
                begin = None
        elif t.type == tokenize.STRING and depth == 0:
            found.append((t.start[0] - 1, t.start[1], t.end[0] - 1, t.end[1], t.string))
    return found


def _neutral(source: str) -> str:
    """``source`` with IPython's magics and shell lines (``%time``, ``!pip``) made ``pass``: Python that ``ast`` reads,
    with the same lines."""
    return "\n".join(
        re.sub(r"^(\s*)[%!].*$", r"\1pass", line) if re.match(r"^\s*[%!]", line) else line
        for line in source.split("\n")
    )


def display_strings(source: str) -> list[tuple[int, int, int, int]]:
    """The spans ``(row, column, end row, end column)`` (rows from 0, columns in characters) of the string literals of
    Python ``source`` that the learner reads (the module docstring's "What code shows"); none for code ``ast`` cannot
    read."""
    try:
        tree = ast.parse(_neutral(source))
    except SyntaxError:
        return []
    lines = source.split("\n")
    nodes = list(ast.walk(tree))  # walked once, read by every rule below
    spans: list[tuple[int, int, int, int]] = []

    def char(row: int, col: int) -> int:  # ast's columns count UTF-8 bytes
        return len(lines[row].encode("utf-8")[:col].decode("utf-8", "replace"))

    kept: list[ast.AST] = []

    def add(node: ast.AST) -> None:
        kept.append(node)

    listed: set[str] = set()  # names whose value a display call shows: print("\\n".join(outcomes))

    def shown(node: ast.AST, prose_only: bool = False) -> None:
        """Every string literal of ``node``, but keys (``d["key"]``) and comparisons; in another call's arguments
        (``print(smallest_n_line("the T4 at its usable 14.75 GiB:", ...))``) an f-string or a string of two words."""
        if isinstance(node, ast.JoinedStr):
            add(node)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if not prose_only or (_PROSE.search(node.value) and not _CODE_LIKE.search(node.value)):
                add(node)
        elif isinstance(node, ast.Name):
            listed.add(node.id)
        elif isinstance(node, ast.Subscript):
            shown(node.value, prose_only)
        elif isinstance(node, ast.Compare):
            return
        elif isinstance(node, ast.Call):
            name = _name(node.func)
            shows = name in _SKIPPED_CALLS or name in DISPLAY_CALLS
            if isinstance(node.func, ast.Attribute):
                shown(node.func.value, prose_only or not shows)
            for arg in _texts(node) if shows else node.args:
                shown(arg, prose_only or not shows)
        else:
            for child in ast.iter_child_nodes(node):
                shown(child, prose_only)

    def elements(node: ast.AST) -> None:
        """The labels of a literal a ``for`` loop walks: strings of its tuples, lists and dicts, no call's."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            add(node)
        elif isinstance(node, ast.JoinedStr):
            add(node)
        elif isinstance(node, (ast.Tuple, ast.List, ast.Dict, ast.Set)):
            for child in ast.iter_child_nodes(node):
                elements(child)

    for node in nodes:
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                add(first.value)
        if isinstance(node, ast.Call):
            if _name(node.func) in DISPLAY_CALLS:
                for arg in _texts(node):
                    shown(arg)
            else:
                for keyword in node.keywords:
                    if keyword.arg in DISPLAY_KEYWORDS:
                        shown(keyword.value)
        elif isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):  # positional: the message
            for arg in node.exc.args:
                shown(arg)
        elif isinstance(node, ast.Assert) and node.msg is not None:
            shown(node.msg)
        elif isinstance(node, (ast.For, ast.comprehension)) and isinstance(node.iter, (ast.Tuple, ast.List, ast.Dict)):
            elements(node.iter)
    # a list a display call shows: the strings appended to it (`outcomes.append(f"window {k}: ...")`)
    for node in nodes:
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "append"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in listed
            and node.args
        ):
            shown(node.args[0])
    # a loop's variable a display call shows, over a literal (or a name assigned one): the sentences in it
    # (`for x, y, text, colour in boxes.values(): ax.text(x, y, text)`)
    assigned = {
        t.id: n.value
        for n in nodes
        if isinstance(n, ast.Assign) and isinstance(n.value, (ast.Dict, ast.List, ast.Tuple))
        for t in n.targets
        if isinstance(t, ast.Name)
    }

    def sentences(node: ast.AST) -> None:
        if isinstance(node, ast.JoinedStr) or (
            isinstance(node, ast.Constant) and isinstance(node.value, str) and _PROSE.search(node.value)
        ):
            add(node)
        elif isinstance(node, (ast.Tuple, ast.List, ast.Dict, ast.Set)):
            for child in ast.iter_child_nodes(node):
                sentences(child)

    for node in nodes:
        if isinstance(node, (ast.For, ast.comprehension)) and any(
            isinstance(t, ast.Name) and t.id in listed for t in ast.walk(node.target)
        ):
            source = node.iter
            if isinstance(source, ast.Call) and _name(source.func) in ("values", "items"):
                source = source.func.value
            if isinstance(source, ast.Name):
                source = assigned.get(source.id)
            if source is not None:
                sentences(source)
    # a name a display call shows, made by a call: the sentences passed to it
    # (`summary = fits_summary(peaks, 1, 32.0, "a 32 MiB budget")`, then `print(summary["text"])`)
    for node in nodes:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and any(isinstance(t, ast.Name) and t.id in listed for t in node.targets)
        ):
            shown(node.value, prose_only=True)
    # a name a shown f-string prints, assigned strings in this cell: `where = "every micro-batch" if ... else "..."`
    printed = {
        v.value.id
        for n in kept
        if isinstance(n, ast.JoinedStr)
        for v in n.values
        if isinstance(v, ast.FormattedValue) and isinstance(v.value, ast.Name)
    }
    inside = {id(x) for n in kept if isinstance(n, ast.JoinedStr) for x in ast.walk(n)}
    printed -= {
        n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and id(n) not in inside
    }  # a name the code uses too (`torch.amp.GradScaler(amp_device)`) holds code, not text
    for node in nodes:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in printed for t in node.targets):
            if isinstance(node.value, (ast.Constant, ast.JoinedStr, ast.IfExp, ast.BoolOp)):
                shown(node.value)
    # a string also written elsewhere in the cell is code (a key, a value compared): `if logging == "window sum"`
    shown_nodes = {id(n) for n in kept}
    code_values = {
        n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in shown_nodes
    }
    for node in kept:
        if not (isinstance(node, ast.Constant) and node.value in code_values):
            row, end = node.lineno - 1, node.end_lineno - 1
            spans.append((row, char(row, node.col_offset), end, char(end, node.end_col_offset)))
    return sorted(set(spans))


def _texts(call: ast.Call) -> list[ast.AST]:
    """The arguments of a display call that are texts: the positional ones and ``DISPLAY_KEYWORDS`` (not ``ha="right"``,
    ``loc="upper left"``, ``sep=" | "``)."""
    return [*call.args, *(k.value for k in call.keywords if k.arg in DISPLAY_KEYWORDS)]


def _name(func: ast.AST) -> str | None:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def string_fields(text: str) -> list[tuple[str, bool]]:
    """An f-string's text (between its quotes, as written) cut into ``(piece, is_field)``: literal text, with ``{{``
    and ``}}`` as written, and each ``{field}`` whole (nested braces, quotes and format specs inside it).

    Raises:
        ValueError: a field that does not close.
    """
    out, i, literal = [], 0, ""
    while i < len(text):
        ch = text[i]
        if ch in "{}" and text[i : i + 2] in ("{{", "}}"):
            literal += text[i : i + 2]
            i += 2
            continue
        if ch != "{":
            literal += ch
            i += 1
            continue
        depth, j, quote = 0, i, None
        while j < len(text):
            c = text[j]
            if quote:
                if c == quote:
                    quote = None
            elif c in "'\"":
                quote = c
            elif c in "{[(":
                depth += 1
            elif c in "}])":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        if j >= len(text):
            raise ValueError(f"an f-string field that does not close: {text!r}")
        if literal:
            out.append((literal, False))
            literal = ""
        out.append((text[i : j + 1], True))
        i = j + 1
    if literal:
        out.append((literal, False))
    return out


def field_key(field: str) -> str:
    """An f-string field with the text of the strings inside it blanked (``{', '.join(x) or 'none yet'}`` ->
    ``{''.join(x) or ''}``): what a translation keeps of a field, whose quoted words it may translate."""
    return re.sub(r"'[^']*'|\"[^\"]*\"", "''", field)


def _string_items(source: str, offsets: list[int]) -> list[tuple[int, int, Segment]]:
    """``(start, end, segment)`` of every string literal the learner reads (``display_strings``) that has a word."""
    spans = display_strings(source)
    items = []
    for row, col, erow, ecol, text in _python_strings(source):
        if not any((r, c) <= (row, col) and (erow, ecol) <= (er, ec) for r, c, er, ec in spans):
            continue
        start, end = offsets[row] + col, offsets[erow] + ecol
        text = text or source[start:end]
        head = _PREFIX.match(text)
        if head is None:
            continue
        quote = head.group(2)
        body = text[len(head.group(0)) : len(text) - len(quote)]
        words = body
        if "f" in head.group(1).lower():
            words = "".join(piece for piece, field in string_fields(body) if not field)
        if has_words(words):
            items.append((start, end, Segment("string", body, marker=head.group(0), end=quote)))
    return items


def code_segments(source: str, language: str = "python", *, strings: bool = False) -> list[Segment]:
    """The segments of code: the code kept, and its comments as units (``language``: ``python`` or ``shell``);
    ``strings``: also the string literals the learner reads (a code cell's, not a fence's: ``display_strings``).
    Cached: extraction, the build and the checks cut the same cells.

    Raises:
        ValueError: Python code that ``tokenize`` cannot read.
    """
    return list(_code_segments(source, language, strings))


@functools.lru_cache(maxsize=4096)
def _code_segments(source: str, language: str, strings: bool) -> tuple[Segment, ...]:
    comments = [
        c
        for c in (_python_comments(source) if language == "python" else _shell_comments(source))
        if not _is_marker(c[2]) and has_words(_split_comment(c[2])[1])
    ]
    lines = source.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    items: list[tuple[int, int, Segment]] = []
    k = 0
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
        texts = "\n".join(_split_comment(t)[1] for _, _, t in group)
        last_row, last_col, last_text = group[-1]
        segment = Segment("comment", texts, marker=marker, indent=lines[row][:col] if alone else "", single=not alone)
        items.append((offsets[row] + col, offsets[last_row] + last_col + len(last_text), segment))
    if strings and language == "python":
        items += _string_items(source, offsets)
    out: list[Segment] = []
    pos = 0  # offset in source up to which segments are made
    for start, end, segment in sorted(items, key=lambda item: item[0]):
        _keep(out, source[pos:start])
        out.append(segment)
        pos = end
    _keep(out, source[pos:])
    return tuple(out)


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
        if seg.kind == "string":
            text = seg.marker + text + seg.end
        elif seg.kind == "comment":
            if seg.single and "\n" in text:
                raise ValueError(f"the comment {seg.text!r} follows code: translate it on one line, got {text!r}")
            text = f"\n{seg.indent}".join(seg.marker + line for line in text.split("\n"))
        parts.append(text)
    return "".join(parts)


def strip_code_text(source: str) -> str:
    """Python ``source`` without its comments and with every string the learner reads (``display_strings``) as
    ``""``: what a translation may not change in a code cell."""
    return strip_comments(
        join(code_segments(source, strings=True), lambda seg: "" if seg.kind == "string" else seg.text)
    )


def strip_comments(source: str) -> str:
    """Python ``source`` without its comments and without the lines only comments held (trailing spaces removed):
    what a translation may not change in a code cell."""
    lines = source.split("\n")
    for row, col, _text in reversed(_python_comments(source)):
        lines[row] = lines[row][:col].rstrip()
    return "\n".join(line for line in lines if line.strip())
