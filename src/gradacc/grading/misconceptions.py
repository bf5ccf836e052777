"""The class view of misconceptions (issue 53): per check, how many students hold each misconception their visible
check recognised, from a gradebook's ``misconceptions`` column (``gradacc grade``), as a table and a bar chart.

``gradacc misconceptions GRADEBOOK.csv --out DIR`` prints the table (Markdown), and writes ``DIR/misconceptions.csv``
(check, misconception id, its name, students, students graded on that check) and ``DIR/misconceptions.png`` (one
horizontal bar per check and misconception, longest first): what to re-teach. A student is counted once per check
and misconception, whatever number of files they handed in.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from .export import _read_csv
from .files import write_csv

__all__ = ["count_misconceptions", "write_class_view"]


def _pairs(cell: str) -> list[tuple[str, str]]:
    """``"2.1: mean-of-means; 2.2: last-window-dropped"`` -> ``[("2.1", "mean-of-means"), ...]``."""
    pairs = []
    for part in (p.strip() for p in cell.split(";")):
        check, sep, key = part.partition(":")
        if sep and key.strip():
            pairs.append((check.strip(), key.strip()))
    return pairs


def count_misconceptions(rows: list[dict[str, str]]) -> tuple[Counter, Counter]:
    """From gradebook rows (dicts of its CSV): ``{(check, id): students holding it}`` and ``{check: students graded
    on it}`` (a student with a number in the ``check X.Y`` column)."""
    held: dict[tuple[str, str], set[str]] = {}
    graded: dict[str, set[str]] = {}
    for row in rows:
        student = row.get("student", "")
        for column, value in row.items():
            if column.startswith("check ") and value not in ("", None):
                graded.setdefault(column.removeprefix("check "), set()).add(student)
        for check, key in _pairs(row.get("misconceptions", "") or ""):
            held.setdefault((check, key), set()).add(student)
    return (
        Counter({pair: len(students) for pair, students in held.items()}),
        Counter({check: len(students) for check, students in graded.items()}),
    )


def _check_key(check: str) -> tuple[int, ...]:
    return tuple(int(part) if part.isdigit() else 0 for part in check.split("."))


def write_class_view(gradebook: Path, out: Path) -> tuple[str, Path, Path]:
    """Count ``gradebook``'s misconceptions; write ``out/misconceptions.csv`` and ``out/misconceptions.png``.

    Returns the Markdown table and the two paths.

    Raises:
        ValueError: the gradebook has no ``misconceptions`` column (written by a gradacc older than issue 53).
    """
    from ..course.misconceptions import lookup

    header, rows = _read_csv(Path(gradebook))
    if "misconceptions" not in header:
        raise ValueError(f"{gradebook} has no misconceptions column: grade the class again with this gradacc")
    held, graded = count_misconceptions(rows)
    ordered = sorted(held, key=lambda pair: (_check_key(pair[0]), -held[pair], pair[1]))
    table = ["| check | misconception | students | of graded |", "|---|---|---|---|"]
    records = []
    for check, key in ordered:
        name = lookup(key).name if _known(key) else key
        table.append(f"| {check} | {name} (`{key}`) | {held[check, key]} | {graded.get(check, 0)} |")
        records.append([check, key, name, str(held[check, key]), str(graded.get(check, 0))])
    if not ordered:
        table.append("| - | no misconception recognised | 0 | - |")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    csv_path, png_path = out / "misconceptions.csv", out / "misconceptions.png"
    write_csv(csv_path, ["check", "misconception", "name", "students", "graded"], records)
    _bar_chart(ordered, held, graded, png_path)
    return "\n".join(table), csv_path, png_path


def _known(key: str) -> bool:
    from ..course.misconceptions import catalogue

    return key in catalogue()


def _bar_chart(ordered: list[tuple[str, str]], held: Counter, graded: Counter, path: Path) -> None:
    """One horizontal bar per (check, misconception): the students holding it, out of those graded on the check."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{check}  {key}" for check, key in ordered] or ["(none recognised)"]
    counts = [held[pair] for pair in ordered] or [0]
    fig, ax = plt.subplots(figsize=(7.5, 1.2 + 0.32 * len(labels)), dpi=100)
    bars = ax.barh(range(len(labels)), counts, color="#4c72b0")
    for bar, pair in zip(bars, ordered, strict=False):
        ax.annotate(
            f"{held[pair]} of {graded.get(pair[0], 0)}",
            (bar.get_width(), bar.get_y() + bar.get_height() / 2),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            fontsize=9,
        )
    ax.set_yticks(range(len(labels)), labels, fontsize=9)
    ax.invert_yaxis()
    ax.set_xlabel("students holding the misconception")
    ax.set_title("Misconceptions recognised by the visible checks, per check")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_xlim(0, max(counts + [1]) * 1.25)
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)


def _cmd_misconceptions(args) -> int:
    table, csv_path, png_path = write_class_view(Path(args.gradebook), Path(args.out))
    print(table)
    print(f"wrote {csv_path} and {png_path}")
    return 0


def add_cli(subparsers) -> None:
    p = subparsers.add_parser(
        "misconceptions",
        help="count, per check, the students holding each misconception (a table and a bar chart)",
        description="Read GRADEBOOK (gradacc grade's CSV) and count, per check, how many students hold each "
        "misconception their visible check recognised (the misconceptions column): a Markdown table on stdout, "
        "OUT/misconceptions.csv and OUT/misconceptions.png.",
    )
    p.add_argument("gradebook", help="gradebook CSV written by gradacc grade")
    p.add_argument("--out", default=".", help="folder for misconceptions.csv and misconceptions.png (default: .)")
    p.set_defaults(func=_cmd_misconceptions)
