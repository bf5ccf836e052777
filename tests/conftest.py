"""Shared fixtures, and an end-of-session report: every notebook run's wall time and kernel peak memory, and the
measurements tests record (e.g. the browser test's redraw time). Every test's duration (set-up + call + tear-down,
seconds) and CPU time (the test process's threads and the children it waited for: notebook runners and their kernels,
ranks, graders) go to ``test-artifacts/durations.json`` with the totals per file: where the suite's time goes, to
read (never asserted; tests/README.md gives the budget).

Records go to a JSON-lines file named by ``GRADACC_TEST_REPORT`` (set once by the controlling pytest process, inherited
by pytest-xdist workers), so the report is complete with ``-n 2`` too.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from _pytest.mark.expression import Expression

ROOT = Path(__file__).resolve().parents[1]
_REPORT_ENV = "GRADACC_TEST_REPORT"


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


def ensure_bwrap() -> str:
    """The grader's default sandbox works here: bubblewrap is installed from Debian with apt-get if missing (as
    tests/test_browser.py installs chromium) and starts. Fails, never skips, when it cannot. Returns its row label."""
    import shutil

    from gradacc.grading import GradingError
    from gradacc.grading.sandbox import start_sandbox

    if shutil.which("bwrap") is None:
        if shutil.which("apt-get") is None:
            pytest.fail("bwrap is not installed and there is no apt-get to install it: install bubblewrap")
        sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        wait = ["-o", "DPkg::Lock::Timeout=300"]  # the other xdist worker may be installing chromium
        for command in (
            ["apt-get", *wait, "update", "-q"],
            ["apt-get", *wait, "install", "-y", "-q", "--no-install-recommends", "bubblewrap"],
        ):
            proc = subprocess.run(sudo + command, capture_output=True, text=True, env=env, timeout=900)
            if proc.returncode != 0:
                pytest.fail(
                    f"could not install bubblewrap: `{' '.join(sudo + command)}` exited {proc.returncode}\n"
                    f"{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
                )
    try:
        return start_sandbox("bwrap").label
    except GradingError as error:
        pytest.fail(f"the grader's sandbox cannot start here: {error}")


@pytest.fixture(scope="session")
def bwrap() -> str:
    """``ensure_bwrap()`` once per test process: for the tests that grade with the default sandbox."""
    return ensure_bwrap()


def _append(record: dict) -> None:
    path = os.environ.get(_REPORT_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")


def record_notebook_run(name: str, run) -> None:
    """Remember one ``gradacc.course.notebooks.NbvalRun`` for the end-of-session report."""
    _append({"notebook": name, "wall_s": run.wall_s, "peak_mib": run.peak_mib, "rc": run.returncode,
             "cpu_s": run.cpu_s, "tree_pss_mib": run.tree_pss_mib, "load": os.getloadavg()[0]})  # fmt: skip


def make_lab_launch(target: str) -> tuple[dict[str, str], list[str]]:
    """What ``make <target>`` (``lab`` or ``lab-pt``) gives JupyterLab, read from make's dry run: the environment
    variables it sets (``{"JUPYTERLAB_WORKSPACES_DIR": ...}``) and its ``--LabApp.*`` options. A venv path that does
    not exist makes make plan the install too; only the ``jupyter lab`` command is read."""
    import shlex

    run = subprocess.run(
        ["make", "-n", target, "VENV=build/no-such-venv/.venv"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    (command,) = [c for c in run.stdout.replace("\\\n", " ").splitlines() if "/jupyter lab " in c]
    words = shlex.split(command)
    launcher = next(i for i, w in enumerate(words) if w.endswith("/jupyter"))
    env = dict(w.split("=", 1) for w in words[:launcher])
    return env, [w for w in words[launcher:] if w.startswith("--LabApp.")]


def record_measurement(line: str) -> None:
    """Remember one line (e.g. the browser test's redraw time) for the end-of-session report."""
    _append({"measurement": line})


def pytest_addoption(parser) -> None:
    parser.addoption(
        "--busy-cores",
        type=int,
        default=0,
        metavar="N",
        help="keep N CPU-bound processes running for the whole session: the suite under load, as on a shared "
        "machine or a slow CI runner (`make test-load`)",
    )


_BUSY_LOOP = "import os, signal\nsignal.signal(signal.SIGTERM, lambda *_: os._exit(0))\nwhile True:\n    pass\n"


def _start_load(config) -> None:
    """Start ``--busy-cores`` busy processes (in the controlling process only; stopped in pytest_unconfigure)."""
    n = config.getoption("busy_cores")
    if n < 0:
        raise pytest.UsageError(f"--busy-cores must be >= 0, got {n}")
    config._gradacc_load = [subprocess.Popen([sys.executable, "-c", _BUSY_LOOP]) for _ in range(n)]


def pytest_unconfigure(config) -> None:
    for proc in getattr(config, "_gradacc_load", []):
        proc.terminate()
        proc.wait(timeout=30)
    if getattr(config, "_gradacc_jax_cache", None):
        shutil.rmtree(config._gradacc_jax_cache, ignore_errors=True)


_JAX_CACHE_ENV = "JAX_COMPILATION_CACHE_DIR"


def _share_jax_compilations(config) -> None:
    """One JAX persistent compilation cache for the whole session, in a temporary folder (set in the controlling
    process; the pytest-xdist workers, the notebooks' kernels and the ranks inherit it; ``gradacc grade``'s
    sandboxed kernels see none of it): a program that one process compiled, another one loads instead of compiling
    it again, every program however fast it compiled (an exercise-06 kernel runs about 270 of 30 ms each). The
    solution of exercise 06 took 15.6 s of CPU with an empty cache and 6.0 s with the one its first run left (jax
    0.10.2, 2026-12-03); the results are XLA's own (the same executable, its memory analysis and text the same)."""
    folder = tempfile.mkdtemp(prefix="gradacc-jax-cache-")
    os.environ[_JAX_CACHE_ENV] = folder
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    config._gradacc_jax_cache = folder


def _runs_colab_replica(config) -> bool:
    """Whether this session selects test_colab_replica.py (by the paths given and by ``-m``)."""
    if config.getoption("collectonly"):
        return False
    replica = ROOT / "tests" / "test_colab_replica.py"
    paths = [(config.invocation_params.dir / str(arg).split("::")[0]).resolve() for arg in config.args]
    if not any(path == replica or path in replica.parents for path in paths):
        return False
    markexpr = config.getoption("markexpr")
    return not markexpr or Expression.compile(markexpr).evaluate(lambda name, **_: name in ("colab", "notebook"))


def _build_colab_replica_early() -> None:
    """Build the Colab replica (about 6 GB and 2-3 minutes on the first run; cached) in a background thread of the
    controlling process, so that the download overlaps the other tests. Its tests wait for it (a file lock); if this
    build fails, their fixture builds again and reports the error."""
    import colab_replica

    def build() -> None:
        start = time.perf_counter()
        try:
            colab_replica.ipywidgets_target()  # two small downloads, before the replica's 6 GB
            venv = colab_replica.build()
        except Exception as error:  # the fixture retries and fails with the message
            record_measurement(f"Colab replica: the early build failed ({type(error).__name__}); the tests retry it")
            return
        record_measurement(f"Colab replica: {venv.name} ready after {time.perf_counter() - start:.0f} s")

    threading.Thread(target=build, name="colab-replica-build", daemon=True).start()


def pytest_configure(config) -> None:
    if not hasattr(config, "workerinput"):
        _start_load(config)
    if not hasattr(config, "workerinput") and _REPORT_ENV not in os.environ:  # the controlling process
        fd, path = tempfile.mkstemp(prefix="gradacc-test-report-", suffix=".jsonl")
        os.close(fd)
        os.environ[_REPORT_ENV] = path
        config._gradacc_report = path
    if not hasattr(config, "workerinput") and _runs_colab_replica(config):
        _build_colab_replica_early()
    if not hasattr(config, "workerinput") and _JAX_CACHE_ENV not in os.environ:
        _share_jax_compilations(config)


def pytest_collection_finish(session) -> None:
    """In every test process (each pytest-xdist worker collects the whole suite): once the test modules are imported
    (torch, JAX, transformers, the hidden checks' preambles: about 600,000 objects), collect once and move what
    survives out of the garbage collector's reach (``gc.freeze``). A full collection then scans only what the tests
    made since. transformers' ``Trainer.train`` starts with ``gc.collect()`` (accelerate's ``free_memory``,
    transformers 5.24 ``trainer.py`` line 1593): 0.46 s of CPU per call in such a process, and the 80 trainings of
    the hidden check 5.2's group took 37 s of CPU in collections, 4.6 s frozen (tests/README.md). What is frozen is
    never freed: almost all of it (modules, classes, the collected tests) lives until the process ends anyway."""
    gc.collect()
    gc.freeze()


_STACKS = ROOT / "test-artifacts" / "stacks"


def _stacks_file(worker: str) -> Path:
    return _STACKS / f"{worker}.txt"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """In a pytest-xdist worker: 15 s before pytest-timeout's limit ends the worker (``os._exit``, its own stack dump
    lost with the worker's captured output), every thread's Python stack is written to
    ``test-artifacts/stacks/<worker>.txt``; the controlling process puts it in the crashed test's report
    (``pytest_handlecrashitem``), so a hang in CI says where it hung."""
    import faulthandler

    item._gradacc_cpu = _cpu_s()  # where its set-up's CPU seconds start (pytest_runtest_makereport)
    worker = getattr(item.config, "workerinput", {}).get("workerid")
    timeout = item.config.getini("timeout")
    marker = item.get_closest_marker("timeout")
    seconds = float(marker.args[0]) if marker and marker.args else float(timeout or 0)
    if worker is None or seconds <= 30:
        yield
        return
    _STACKS.mkdir(parents=True, exist_ok=True)
    with open(_stacks_file(worker), "w", encoding="utf-8") as f:
        f.write(f"{item.nodeid}: every thread's stack after {seconds - 15:.0f} s\n")
        f.flush()
        faulthandler.dump_traceback_later(seconds - 15, exit=False, file=f)
        try:
            yield
        finally:
            faulthandler.cancel_dump_traceback_later()
    _stacks_file(worker).unlink(missing_ok=True)


def pytest_handlecrashitem(crashitem, report, sched) -> None:
    """A worker died inside ``crashitem``: add the stacks it wrote before pytest-timeout ended it, if any."""
    for path in sorted(_STACKS.glob("*.txt")) if _STACKS.exists() else []:
        text = path.read_text(encoding="utf-8", errors="replace")
        if text.startswith(f"{crashitem}:") and "\n" in text.strip():
            report.longrepr = f"{report.longrepr}\n\n{text}"


_DURATIONS: dict[str, float] = {}
_CPU: dict[str, float] = {}


def _cpu_s() -> float:
    """CPU seconds (user + system) of this process's threads and of its children that have ended and been waited for
    (a notebook's runner and its kernel, ranks, graders' processes)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Each phase's CPU seconds in the report (``user_properties``, which pytest-xdist sends to the controller): since
    the test's protocol began (``pytest_runtest_protocol``) or its previous phase's report."""
    report = (yield).get_result()
    now = _cpu_s()
    report.user_properties.append(("cpu_s", now - getattr(item, "_gradacc_cpu", now)))
    item._gradacc_cpu = now


def pytest_runtest_logreport(report) -> None:
    """In the controlling process (pytest-xdist forwards the workers' reports): each test's set-up, call and
    tear-down seconds, and CPU seconds, summed."""
    _DURATIONS[report.nodeid] = _DURATIONS.get(report.nodeid, 0.0) + report.duration
    cpu = sum(value for name, value in report.user_properties if name == "cpu_s")
    _CPU[report.nodeid] = _CPU.get(report.nodeid, 0.0) + cpu


def _write_durations(config) -> Path | None:
    if hasattr(config, "workerinput") or not _DURATIONS:
        return None

    def per_file(seconds: dict[str, float]) -> dict[str, float]:
        files: dict[str, float] = {}
        for nodeid, value in seconds.items():
            files[nodeid.split("::")[0]] = files.get(nodeid.split("::")[0], 0.0) + value
        return {f: round(s, 1) for f, s in sorted(files.items(), key=lambda item: -item[1])}

    path = ROOT / "test-artifacts" / "durations.json"
    path.parent.mkdir(exist_ok=True)
    data = {
        "tests": len(_DURATIONS),
        "total_s": round(sum(_DURATIONS.values()), 1),
        "total_cpu_s": round(sum(_CPU.values()), 1),
        "per_file_s": per_file(_DURATIONS),
        "per_file_cpu_s": per_file(_CPU),
        "per_test_s": {t: round(s, 2) for t, s in sorted(_DURATIONS.items(), key=lambda item: -item[1])},
        "per_test_cpu_s": {t: round(s, 2) for t, s in sorted(_CPU.items(), key=lambda item: -item[1])},
    }
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return path


def pytest_terminal_summary(terminalreporter, config) -> None:
    written = _write_durations(config)
    if written is not None:
        terminalreporter.write_line(f"test durations: {written.relative_to(ROOT)} ({len(_DURATIONS)} tests)")
    path = getattr(config, "_gradacc_report", None)
    if not path or not os.path.exists(path):
        return
    records = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    os.unlink(path)
    measurements = [r["measurement"] for r in records if "measurement" in r]
    runs = sorted((r for r in records if "notebook" in r), key=lambda r: r["notebook"])
    load = getattr(config, "_gradacc_load", [])
    if load:
        terminalreporter.section("load")
        terminalreporter.write_line(
            f"{len(load)} busy processes kept the cores busy for the whole session (--busy-cores)"
        )
    if measurements:
        terminalreporter.section("measurements")
        for line in measurements:
            terminalreporter.write_line(line)
    if runs:
        terminalreporter.section("notebook runs: time, load and memory")
        terminalreporter.write_line(
            "wall and CPU seconds (the kernel and its processes), the 1-minute load average at the end, the kernel's "
            "peak RSS and the largest PSS of the kernel with its processes (MiB)"
        )
        head = f"{'notebook':58s} {'wall s':>7s} {'CPU s':>6s} {'load':>5s} {'kernel':>7s} {'tree':>6s} {'rc':>3s}"
        terminalreporter.write_line(head)
        for r in runs:
            cpu, tree, load = (r.get(k) for k in ("cpu_s", "tree_pss_mib", "load"))
            terminalreporter.write_line(
                f"{r['notebook']:58s} {r['wall_s']:7.1f} {cpu or 0:6.1f} {load or 0:5.1f} {r['peak_mib']:7.0f} "
                f"{tree or 0:6.0f} {r['rc']:3d}"
            )
