"""The classroom grader (the grading room of the package): ``gradacc grade SUBMISSIONS --reference solutions/ --out gradebook.csv``.

Nothing a student can edit decides a score. For every (student, exercise) the grader

1. reads the submitted notebook (bad JSON, an empty file, something that is not a notebook: ``invalid-notebook``);
2. takes only its ``solution`` cells, matched to the reference's by cell id, or, when no id matches, by order (cells
   tagged ``solution`` in order, else an alignment of the code cells against the generated exercise), with a warning;
   nbval comment markers in them (``# NBVAL_SKIP`` ...) are neutralized so the student's code always runs;
3. puts them into a copy of the pristine reference notebook (``solutions/NN_topic.ipynb``): check cells, expected
   outputs, points, tags and markers all come from the reference; hidden checks (``hidden/NN_topic.py``, see
   ``load_hidden``) are inserted right after the check cell they belong to;
4. runs that merged notebook with ``pytest --nbval-lax`` in a separate process (``gradacc.course.nbval_run.run_nbval``) in a
   temporary folder, with a wall-clock limit per notebook and per cell, a memory limit, a cap on output size and a
   watchdog on the kernel (``gradacc.grading.plugin``), that process and its kernel inside a bubblewrap sandbox (no
   network, none of the instructor's files or other students', a size-capped scratch folder, its own pid namespace:
   ``gradacc.grading.sandbox``), several submissions in parallel; every verdict comes back through a pipe only that
   process holds (the kernel can neither inherit it nor open it), never through a file;
5. scores each check: its points when nbval passed the reference's check cell AND every hidden check of it printed
   exactly what the reference solution printed for the same inputs (drawn from a seed chosen at grading time; the
   expected text is measured by running the reference itself twice before grading, and never enters a student's
   process).

Statuses (the gradebook's ``status`` column): see ``STATUSES``.

Modules: ``discover`` (references, hidden checks, submissions), ``merge`` (answers into the reference), ``run`` (the
separate nbval process, with ``plugin`` inside it), ``sandbox`` (where that process runs), ``score`` (checks,
``grade``), ``bench`` (``gradacc grade-bench``), ``gradebook`` (rows, CSV, feedback), ``files`` (what the grader
writes for the instructor: private ``0600`` files and formula-safe CSV, one writer for every CSV file), ``cli``
(``gradacc grade``),
``shards`` (``gradacc grade --shard K/N`` and ``gradacc grade-merge``: a class graded as a job array), ``progress``
(``gradacc progress``: a learner's own progress, judged as the grader judges), ``similarity`` (``gradacc similarity``:
the copying report, pairs of similar answers, never a score change);
for the autograders classrooms already run: ``autograders`` (``gradacc export-assignments``: nbgrader and
Otter-Grader assignments), ``hiddentest`` (the hidden test those run in the student's kernel) and ``external``
(nbgrader's own commands on a class: ``gradacc grade-bench --nbgrader``).
Grading may import the course's notebook tools (``gradacc.course``) and nothing of the lessons' teaching modules;
nothing outside ``grading`` imports it except the command line (``tests/test_layout.py``) and lesson 00's cell
that calls ``progress``.
"""

from .bench import bench_grading, bench_sandbox, write_class
from .discover import discover, load_hidden, load_references, read_submission
from .gradebook import STATUSES, Gradebook, GradingError, Reference, Row, Settings
from .journal import read_journal
from .merge import match_solutions, merge_submission
from .outputs import same_output
from .score import grade

__all__ = [
    "STATUSES",
    "Settings",
    "Reference",
    "Row",
    "Gradebook",
    "GradingError",
    "load_hidden",
    "load_references",
    "read_submission",
    "match_solutions",
    "merge_submission",
    "same_output",
    "discover",
    "grade",
    "read_journal",
    "bench_grading",
    "bench_sandbox",
    "write_class",
]
