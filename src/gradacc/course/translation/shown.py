"""What code shows the learner: the string literals of a code cell that it prints, draws or raises
(``display_strings``, the rules in ``units``' module docstring), and the ``{fields}`` of an f-string a translation
keeps (``string_fields``, ``field_key``)."""

from __future__ import annotations

import ast
import io
import re
import tokenize

__all__ = ["DISPLAY_CALLS", "DISPLAY_KEYWORDS", "display_strings", "string_fields", "field_key", "grouped"]

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


_SPEC = re.compile(r"\{(?P<head>.*?(?:![rsa])?):(?P<spec>[^:\[\](){}'\"]*)\}", re.S)
"""A field with a format spec: its expression (and conversion), and the spec after the last colon."""
_GROUPING = re.compile(r",(?=(?:\.\d+)?[a-zA-Z%]?$)")
"""The ``,`` grouping option of a format spec (``,``, ``,.1f``, ``>12,d``), not a ``,`` fill (``,<10``)."""


def grouped(field: str) -> bool:
    """The field's format spec asks for the ``,`` thousands separator (``{n:,}``, ``{x:,.1f}``)."""
    match = _SPEC.fullmatch(field)
    return bool(match and _GROUPING.search(match.group("spec")))


def field_key(field: str) -> str:
    """An f-string field with the text of the strings inside it blanked (``{', '.join(x) or 'none yet'}`` ->
    ``{''.join(x) or ''}``) and without the ``,`` grouping option of its format spec (``{n:,}`` -> ``{n}``,
    ``{x:,.1f}`` -> ``{x:.1f}``): what a translation keeps of a field, whose quoted words it may translate and whose
    thousands comma it may drop (a Brazilian reads ``826,378`` as a decimal)."""
    field = re.sub(r"'[^']*'|\"[^\"]*\"", "''", field)
    match = _SPEC.fullmatch(field)
    if match and _GROUPING.search(match.group("spec")):
        spec = _GROUPING.sub("", match.group("spec"))
        field = "{" + match.group("head") + (":" + spec if spec else "") + "}"
    return field
