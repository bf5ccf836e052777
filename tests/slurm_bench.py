"""Measure a class graded by the instructor's guide's Slurm scripts on a one-node cluster, with 1, 2 and 4 shards:

    .venv/bin/python tests/slurm_bench.py --exercise 02_pytorch --n 30 --shards 1 2 4 --json bench.json

For each shard count: a fresh results folder with one seed (the same for every count), ``grade-class.sh`` submitted
(``SHARDS=k``), the merge job waited for; the wall time from submission to the merge job's end, the CPU seconds the
shards' records give (``cpu_s``: each grader, its grading processes and kernels) and the load average before and
after. The merged gradebooks of every shard count must be equal (the ``seconds`` and ``peak_mib`` columns aside).
The class is ``gradacc grade-bench --write-class``'s: a third right, a third unanswered, a third wrong. Not a test:
docs/instructors/cluster.md gives its table.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from slurm_cluster import Cluster  # noqa: E402
from test_cluster import _csv_rows, guide_files  # noqa: E402

from gradacc.grading import write_class  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exercise", default="02_pytorch")
    parser.add_argument("--n", type=int, default=30)
    parser.add_argument("--shards", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--seed", type=int, default=47)
    parser.add_argument("--json", help="write the measurements here")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="gradacc-slurm-bench-"))
    subs, scripts = root / "submissions", root / "scripts"
    write_class(ROOT / "solutions", args.exercise, args.n, subs, hidden=ROOT / "hidden")
    scripts.mkdir()
    for name, text in guide_files().items():
        (scripts / name).write_text(text)
    runs, books = [], {}
    with Cluster(cpus=os.cpu_count() or 2) as cluster:
        for count in args.shards:
            results = root / f"results-{count}"
            results.mkdir()
            (results / "seed").write_text(f"{args.seed}\n")
            load_before = os.getloadavg()[0]
            start = time.perf_counter()
            env = {"COURSE": str(ROOT), "SUBMISSIONS": str(subs), "RESULTS": str(results), "SHARDS": str(count)}
            submitted = cluster.run(["bash", str(scripts / "grade-class.sh")], **env)
            array, merge = re.search(r"^array (\d+) merge (\d+)", submitted, re.M).group(1, 2)
            states = {**cluster.wait(array, timeout=6 * 3600), **cluster.wait(merge, timeout=3600)}
            wall = time.perf_counter() - start
            if set(states.values()) != {"COMPLETED"}:
                raise SystemExit(f"{count} shards: {states}; logs in {results}")
            records = [json.loads(p.read_text()) for p in results.glob("gradebook.csv.shards/*/shard.json")]
            books[count] = _csv_rows(results / "gradebook.csv")
            run = {
                "shards": count,
                "submissions": args.n,
                "wall_s": round(wall, 1),
                "cpu_s": round(sum(r["cpu_s"] for r in records), 1),
                "shard_wall_s": sorted(r["wall_s"] for r in records),
                "shard_cpu_s": sorted(r["cpu_s"] for r in records),
                "notebooks": sum(1 for r in records for row in r["rows"] if row["seconds"] is not None),
                "load_average_1min": [round(load_before, 1), round(os.getloadavg()[0], 1)],
            }
            run["cpu_s_per_notebook"] = round(run["cpu_s"] / max(run["notebooks"], 1), 2)
            print(json.dumps(run), flush=True)
            runs.append(run)
    first = books[args.shards[0]]
    equal = {count: book == first for count, book in books.items()}
    result = {"exercise": args.exercise, "cores": os.cpu_count(), "runs": runs, "gradebooks_equal": equal}
    print(json.dumps(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    return 0 if all(equal.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
