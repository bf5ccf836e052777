"""Where a submission's code runs: each grading process and its kernel inside a bubblewrap sandbox.

``start_sandbox("bwrap", ...)`` checks once that the tool starts here and returns a ``Sandbox`` whose ``wrap`` turns the
command of one grading run (``pytest --nbval-lax`` and, under it, the kernel) into a ``bwrap`` command. Inside:

* no network: a network namespace of its own, with only its own loopback (the grading process and its kernel talk
  over it; nothing on the machine's 127.0.0.1 is reachable);
* a filesystem built from nothing (``bwrap`` starts from an empty root, mounted read-only at the end): the system's
  ``/usr`` (and the ``/bin``, ``/lib*`` links into it), a few files of ``/etc`` (``ETC_FILES``) and the Python
  environment the grader itself runs with (its prefix, base prefix and the folders of its ``sys.path``), all
  read-only; a fresh ``/proc`` and ``/dev``. The course folder, ``hidden/``, the reference solutions, the gradebook,
  its journal, the feedback folder and every submission are simply not there. ``start_sandbox`` refuses to start
  when a folder it would show contains one of them (``PYTHONPATH=.`` in the course folder, say);
* one writable folder, the run's working folder (same path as outside), a ``tmpfs`` of ``scratch_mib`` MiB
  (bubblewrap's ``--size``; it caps bytes, not the number of empty files): HOME and TMPDIR point into it, and
  ``/dev/shm`` (POSIX semaphores, shared memory) is a second one of the same size. The merged notebook is bound into
  it read-only: the run can write no file of the machine's disk. Its verdicts leave through the runner's report pipe
  (``gradacc.course.nbval_run.run_nbval``), a descriptor that ``bwrap`` passes on to the grading process only; the
  kernel, started by it, does not inherit it, and cannot open it through ``/proc`` (the grading process is not
  dumpable);
* its own pid namespace, whose init is the grading process (``--as-pid-1``): when it ends, the kernel kills every
  process left in it (double fork and ``setsid`` included) before ``bwrap`` exits; ``--die-with-parent`` does the
  same when the grader dies;
* no capabilities (``--cap-drop ALL``, also when the grader runs as root), ``no_new_privs``, no nested user
  namespaces (``--disable-userns``), its own session (``--new-session``), IPC, UTS and cgroup namespaces; the
  environment is cleared to ``PASSED_ENV`` (no tokens or keys of the instructor's shell);
* the limits of ``gradacc.grading.plugin`` (``RLIMIT_DATA``, ``RLIMIT_FSIZE``, output cap, timeouts) as before:
  rlimits are inherited through ``bwrap``; and the whole tree's memory and processes (``gradacc.grading.limits``:
  a cgroup per notebook, or ``RLIMIT_NPROC`` in this user namespace and a watchdog), named in ``Sandbox.label``.

Why bubblewrap (Debian package ``bubblewrap``, https://github.com/containers/bubblewrap): it is the unprivileged
sandbox that Flatpak is built on; it needs no daemon, no root and no image (the grader's own Python environment is
bound read-only, so the kernel runs exactly the pinned packages, with nothing to rebuild when the pins change), and it
starts in milliseconds. A container engine (Podman, Docker) gives the same namespaces but needs an image holding the
course's environment (about 2.8 GiB) kept in step with the pins. ``none`` runs as before (the student's code as the
instructor's user) and is only chosen explicitly.

Tested with bubblewrap 0.8.0 (Debian 12); ``--size`` needs 0.5.0 or newer, ``--disable-userns`` 0.8.0.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .gradebook import GradingError
from .limits import NotebookLimits, start_limits

__all__ = ["SANDBOXES", "SANDBOX_NONE_WARNING", "PASSED_ENV", "ETC_FILES", "Sandbox", "start_sandbox"]

SANDBOXES: dict[str, str] = {
    "bwrap": "bubblewrap: no network, no view of your files or other students', its own pid namespace, a size-capped "
    "scratch folder (the default)",
    "none": "no isolation: the student's code runs as your user, with your files and network (choose it knowingly)",
}
SANDBOX_NONE_WARNING = (
    "warning: --sandbox none: each student's code runs as your user, with your files, your network and no limit on "
    "the processes it leaves behind (docs/instructors/grader-protects.md)"
)
"""What ``gradacc grade`` prints at the start and at the end of an unsandboxed run."""
PASSED_ENV = ("PATH", "LANG", "LANGUAGE", "TZ", "PYTHONPATH", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE")
"""Variables of the grader's environment a sandboxed run keeps (plus ``LC_*``); every other one is dropped."""
ETC_FILES = (
    "passwd",
    "group",
    "nsswitch.conf",
    "host.conf",
    "hosts",
    "localtime",
    "timezone",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",
    "fonts",
    "mime.types",
)
"""What of ``/etc`` a sandboxed run sees (read-only): user and host names, time zone, the dynamic linker's cache."""
_SYSTEM = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
_INSTALL = {
    "Debian/Ubuntu": "sudo apt-get install bubblewrap",
    "Fedora": "sudo dnf install bubblewrap",
    "Arch": "sudo pacman -S bubblewrap",
}


@dataclass(frozen=True)
class Sandbox:
    """How each grading run is isolated (``start_sandbox`` makes one).

    Attributes:
        kind: ``"bwrap"`` or ``"none"`` (``SANDBOXES``).
        scratch_mib: size of the writable ``tmpfs`` of one run, in MiB (2**20 bytes); 0 for ``none``.
        tool: the ``bwrap`` executable; ``version``: what ``bwrap --version`` printed.
        readable: host folders and files bound read-only into every run (besides ``/usr`` and ``/etc`` files).
        limits: the whole tree's memory and process limits and how they are enforced here (``None``: not limited).
    """

    kind: str
    scratch_mib: int = 0
    tool: str = ""
    version: str = ""
    readable: tuple[str, ...] = ()
    limits: NotebookLimits | None = None

    @property
    def label(self) -> str:
        """What a gradebook row records: ``bubblewrap 0.8.0, 256 MiB scratch`` or ``none``, then the limits that
        held (``; per notebook: 2048 MiB (cgroup v1), 1024 processes (cgroup v1)``, ``NotebookLimits.label``)."""
        isolation = "none" if self.kind == "none" else f"{self.version}, {self.scratch_mib} MiB scratch"
        return f"{isolation}; {self.limits.label if self.limits else 'per notebook: not limited'}"

    def wrap(self, argv: Sequence[str], env: Mapping[str, str], workdir: Path) -> tuple[list[str], dict[str, str]]:
        """The command and environment that run ``argv`` (with ``env`` added to the kept variables) in this sandbox.

        ``workdir`` (an existing folder) becomes the run's scratch ``tmpfs`` at the same path; every file in it now is
        bound into it read-only. ``none``: ``argv`` unchanged, the whole environment. Inherited descriptors pass.
        """
        if self.kind == "none":
            return list(argv), {**os.environ, **env}
        workdir = Path(workdir).resolve()
        home = workdir / "home"
        kept = {k: v for k, v in os.environ.items() if k in PASSED_ENV or k.startswith("LC_")}
        environment = {**kept, **env, "HOME": str(home), "TMPDIR": str(home), "USER": "student", "LOGNAME": "student"}
        args = [self.tool, *_base_args()]
        for path in self.readable:
            args += ["--ro-bind", path, path]
        size = ["--size", str(self.scratch_mib * 2**20)]
        args += [*size, "--tmpfs", str(workdir), "--dir", str(home), *size, "--tmpfs", "/dev/shm"]
        for path in sorted(workdir.iterdir()):
            if path.is_file():
                args += ["--ro-bind", str(path), str(path)]
        args += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", str(workdir), "--", *argv]
        return args, environment


def _base_args() -> list[str]:
    """Namespaces, capabilities and the read-only system part of the root."""
    # --as-pid-1: the grading process is the namespace's init, so when it exits the kernel kills every other process
    # in it before bwrap can report the exit (with bwrap's own init in between, bwrap 0.8.0 reports the exit as soon
    # as the grading process ends, bubblewrap.c do_init(), and a process left behind died a moment later, after the
    # run; the grader also got none of the run's CPU time back through wait())
    args = ["--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session", "--as-pid-1"]
    args += ["--cap-drop", "ALL", "--hostname", "localhost", "--proc", "/proc", "--dev", "/dev"]
    for name in _SYSTEM:
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    for name in ETC_FILES:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    return args


def _python_paths(python: str) -> list[str]:
    """Folders the interpreter ``python`` needs, as it sees them with this environment: its prefixes and the folders
    of its ``sys.path`` (site-packages, ``.pth`` entries such as an editable install's ``src``, ``PYTHONPATH``)."""
    code = "import sys; print('\\n'.join([sys.prefix, sys.base_prefix, sys.exec_prefix, *sys.path]))"
    done = subprocess.run(
        [python, "-c", code], capture_output=True, text=True, env={**os.environ, "PYTHONSAFEPATH": "1"}, timeout=120
    )
    if done.returncode != 0:
        raise GradingError(f"could not ask {python} for its paths: {done.stderr.strip()[-500:]}")
    paths = {os.path.realpath(python), os.path.dirname(python)}
    paths |= {p for p in done.stdout.splitlines() if p and os.path.exists(p)}
    real = {os.path.realpath(p) for p in paths}
    # innermost first would bind twice; keep the outermost of nested folders, and nothing under /usr (bound anyway)
    kept = sorted(p for p in paths | real if os.path.isabs(p) and p != "/usr" and not p.startswith("/usr/"))
    return [p for p in kept if not any(p != q and p.startswith(q.rstrip("/") + "/") for q in kept)]


def start_sandbox(
    kind: str,
    scratch_mib: int = 256,
    *,
    private: Iterable[Path] = (),
    python: str | None = None,
    memory_mib: int | None = None,
    max_processes: int | None = None,
) -> Sandbox:
    """Check that ``kind`` works here and return it, with the whole tree's limits (``memory_mib`` and
    ``max_processes``; not limited when either is ``None``) as ``gradacc.grading.limits.start_limits`` enforces them.

    Args:
        kind: ``"bwrap"`` or ``"none"``.
        scratch_mib: the writable ``tmpfs`` of each run, in MiB.
        private: folders and files no run may see (reference, hidden checks, submissions, gradebook, journal,
            feedback); a read-only folder of the sandbox that contains one of them is refused.
        python: the interpreter of the grading runs (default: this one).

    Raises:
        GradingError: ``kind`` is unknown, or the sandbox cannot start here; the message is one line naming the fix
            (install bubblewrap, enable user namespaces, or ``--sandbox none`` knowingly). It never falls back.
    """
    if kind not in SANDBOXES:
        raise GradingError(f"--sandbox {kind!r} is not one of {', '.join(SANDBOXES)}")
    limits = None if memory_mib is None or max_processes is None else start_limits(memory_mib, max_processes, kind)
    if kind == "none":
        return Sandbox("none", limits=limits)
    if not scratch_mib > 0:
        raise GradingError(f"--scratch-mib must be > 0, got {scratch_mib}")
    knowingly = "or grade with --sandbox none knowingly (each student's code then runs as your user)"
    if not sys.platform.startswith("linux"):
        raise GradingError(
            f"the bwrap sandbox needs Linux (user namespaces), not {sys.platform}: grade in a Linux machine or VM "
            f"(e.g. a Linux container with bubblewrap), {knowingly}"
        )
    tool = shutil.which("bwrap")
    if tool is None:
        install = "; ".join(f"{system}: {command}" for system, command in _INSTALL.items())
        raise GradingError(f"bwrap (bubblewrap) is not installed: install it ({install}), {knowingly}")
    version = subprocess.run([tool, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    python = python or sys.executable
    readable = _python_paths(python)
    for secret in private:
        secret = os.path.realpath(secret)
        for path in readable:
            if secret == path or secret.startswith(path.rstrip("/") + "/"):
                raise GradingError(
                    f"the sandbox would show {path} (a folder of the grading Python: sys.path or PYTHONPATH) and with "
                    f"it {secret}: move the course's environment out of that folder or take it off PYTHONPATH"
                )
    box = Sandbox("bwrap", scratch_mib, tool, version or "bwrap", tuple(readable), limits)
    with tempfile.TemporaryDirectory(prefix="gradacc-sandbox-check-") as tmp:
        args, env = box.wrap([python, "-c", "import sys; print(sys.version_info[0])"], {}, Path(tmp))
        done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)
    if done.returncode != 0 or done.stdout.strip() != "3":
        said = " ".join(done.stderr.split())[-300:] or f"exit code {done.returncode}"
        raise GradingError(
            f"bwrap cannot start a sandbox here ({said}): allow unprivileged user namespaces (Ubuntu 23.10+: sudo "
            "sysctl kernel.apparmor_restrict_unprivileged_userns=0; older Debian: sudo sysctl "
            f"kernel.unprivileged_userns_clone=1; in a container: run it with --privileged), {knowingly}"
        )
    return box
