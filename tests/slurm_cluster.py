"""A one-node Slurm cluster on this machine, for the tests that submit the instructor's guide's Slurm scripts.

Debian's ``slurm-wlm`` and ``munge`` packages (installed with apt-get when ``slurmctld`` is missing, as
``tests/test_browser.py`` installs chromium); ``munged`` (as the ``munge`` user, with its own socket), ``slurmctld`` and
``slurmd`` started as root with a ``slurm.conf`` of their own under a temporary folder, on free ports, so that nothing
of a Slurm already on the machine is used or changed. ``Cluster.env`` is what a client (``sbatch``, ``squeue``,
``sacct``...) needs: ``SLURM_CONF``. Leaving the ``with`` block stops the three daemons by their pid files (the
slurm.conf that worked here is in ../shared/FACTS.md, "Measured later (2026-12-03)").
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

__all__ = ["Cluster", "ensure_slurm"]

_PACKAGES = ("slurm-wlm", "munge")


class SlurmUnavailable(RuntimeError):
    """Slurm cannot be installed or started here (the test fails with this message)."""


def ensure_slurm() -> None:
    """Install Debian's slurm-wlm and munge with apt-get when ``slurmctld`` is missing (under a file lock: another test
    process may be installing a package). Raises ``SlurmUnavailable`` when it cannot."""
    if os.geteuid() != 0:
        raise SlurmUnavailable("a one-node Slurm cluster needs root (slurmd runs jobs as their user)")
    with open(Path(tempfile.gettempdir()) / "gradacc-apt-install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if all(shutil.which(tool) for tool in ("slurmctld", "slurmd", "munged", "sbatch")):
            return
        if shutil.which("apt-get") is None:
            raise SlurmUnavailable("slurmctld is not installed and there is no apt-get: install slurm-wlm and munge")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        wait = ["-o", "DPkg::Lock::Timeout=300"]
        for command in (
            ["apt-get", *wait, "update", "-q"],
            ["apt-get", *wait, "install", "-y", "-q", "--no-install-recommends", *_PACKAGES],
        ):
            done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
            if done.returncode != 0:
                raise SlurmUnavailable(f"`{' '.join(command)}` exited {done.returncode}: {done.stderr[-1500:]}")


def _free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


class Cluster:
    """``with Cluster(cpus=2) as cluster:`` a one-node cluster (``cluster.env`` for clients, ``cluster.run(...)``).

    Args:
        cpus: the node's CPUs as Slurm sees them (at most this machine's cores); each task gets whole cores.
        memory_mib: the node's ``RealMemory`` in MiB.
    """

    def __init__(self, cpus: int = 2, memory_mib: int = 20000) -> None:
        self.cpus, self.memory_mib = cpus, memory_mib
        self.root: Path | None = None
        self.env: dict[str, str] = {}
        self._pid_files: list[Path] = []

    # ------------------------------------------------------------------------------------------------ set-up
    def __enter__(self) -> Cluster:
        ensure_slurm()
        self.root = Path(tempfile.mkdtemp(prefix="gradacc-slurm-"))
        self.root.chmod(0o755)  # munged (user munge) reaches its folder below
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _start(self) -> None:
        root, host = self.root, socket.gethostname().split(".")[0]
        munge = pwd.getpwnam("munge")
        mdir = root / "munge"
        mdir.mkdir()
        mdir.chmod(0o755)  # munged: its socket's folder must be searchable by all (clients connect as any user)
        key = mdir / "munge.key"
        if Path("/etc/munge/munge.key").exists():
            shutil.copyfile("/etc/munge/munge.key", key)
        else:
            key.write_bytes(os.urandom(128))
        key.chmod(0o400)
        os.chown(mdir, munge.pw_uid, munge.pw_gid)
        os.chown(key, munge.pw_uid, munge.pw_gid)
        msock, mpid = mdir / "munge.socket", mdir / "munged.pid"
        self._pid_files.append(mpid)
        self._check(
            ["runuser", "-u", "munge", "--", "munged", f"--socket={msock}", f"--key-file={key}",
             f"--pid-file={mpid}", f"--log-file={mdir / 'munged.log'}", f"--seed-file={mdir / 'munged.seed'}"],
            "munged",
        )  # fmt: skip
        for sub in ("state", "spool", "log"):
            (root / sub).mkdir()
        ctld_port, slurmd_port = _free_ports(2)
        conf = root / "slurm.conf"
        conf.write_text(
            "\n".join(
                [
                    "ClusterName=gradacc-test",
                    f"SlurmctldHost={host}",
                    f"SlurmctldPort={ctld_port}",
                    f"SlurmdPort={slurmd_port}",
                    "SlurmUser=root",
                    "AuthType=auth/munge",
                    "CredType=cred/munge",
                    f"AuthInfo=socket={msock}",
                    "ProctrackType=proctrack/linuxproc",
                    "TaskPlugin=task/none",
                    "JobAcctGatherType=jobacct_gather/none",
                    "SelectType=select/cons_tres",
                    "SelectTypeParameters=CR_Core",
                    "ReturnToService=2",
                    "KillWait=5",
                    "MinJobAge=600",
                    f"StateSaveLocation={root / 'state'}",
                    f"SlurmdSpoolDir={root / 'spool'}",
                    f"SlurmctldPidFile={root / 'slurmctld.pid'}",
                    f"SlurmdPidFile={root / 'slurmd.pid'}",
                    f"SlurmctldLogFile={root / 'log' / 'slurmctld.log'}",
                    f"SlurmdLogFile={root / 'log' / 'slurmd.log'}",
                    f"NodeName={host} CPUs={self.cpus} RealMemory={self.memory_mib} State=UNKNOWN",
                    f"PartitionName=grading Nodes={host} Default=YES MaxTime=INFINITE State=UP",
                ]
            )
            + "\n"
        )
        self.env = {**os.environ, "SLURM_CONF": str(conf)}
        self._pid_files += [root / "slurmctld.pid", root / "slurmd.pid"]
        self._check(["slurmctld", "-f", str(conf)], "slurmctld")
        self._check(["slurmd", "-f", str(conf)], "slurmd")
        for _ in range(300):  # the node registers with slurmctld: idle within a few seconds
            out = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, env=self.env).stdout
            if out.strip() == "idle":
                return
            time.sleep(0.2)
        raise SlurmUnavailable(f"the node did not become idle: sinfo said {out!r}; logs in {root / 'log'}")

    def _check(self, argv: list[str], name: str) -> None:
        done = subprocess.run(argv, capture_output=True, text=True, env=self.env or os.environ, timeout=60)
        if done.returncode != 0:
            raise SlurmUnavailable(f"{name} did not start ({done.returncode}): {done.stderr[-1500:]}")

    # ------------------------------------------------------------------------------------------------- use
    def run(self, argv: list[str], **env: str) -> str:
        """Run a Slurm client command (``sbatch``, ``scancel``...) against this cluster; returns its stdout."""
        done = subprocess.run(argv, capture_output=True, text=True, env={**self.env, **env}, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"`{' '.join(argv)}` exited {done.returncode}: {done.stderr[-2000:]}")
        return done.stdout

    def states(self, job: str) -> dict[str, str]:
        """``{job id: state}`` of a job (an array's tasks each by ``JOB_TASK``), from ``scontrol show job``."""
        out = subprocess.run(
            ["scontrol", "-o", "show", "job", job], capture_output=True, text=True, env=self.env, timeout=60
        ).stdout
        states = {}
        for line in out.splitlines():
            fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
            task = fields.get("ArrayTaskId")
            if not task:
                states[fields.get("JobId", "?")] = fields.get("JobState", "?")
                continue
            for part in task.split("%")[0].split(","):  # tasks not started yet show as one line: 0-3, 0,2
                low, _, high = part.partition("-")
                for index in range(int(low), int(high or low) + 1):
                    states[f"{fields.get('ArrayJobId')}_{index}"] = fields.get("JobState", "?")
        return states

    def wait(self, job: str, timeout: float = 900) -> dict[str, str]:
        """Wait until no task of ``job`` is pending or running; returns ``states``."""
        deadline = time.monotonic() + timeout
        while True:
            states = self.states(job)
            if states and not any(s in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING") for s in states.values()):
                return states
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {job} still {states} after {timeout:.0f} s")
            time.sleep(1)

    def pids(self) -> list[int]:
        """The process ids of munged, slurmctld and slurmd (from their pid files)."""
        pids = []
        for pid_file in self._pid_files:
            with contextlib.suppress(OSError, ValueError, IndexError):
                pids.append(int(pid_file.read_text().split()[0]))
        return pids

    def daemons_cpu_s(self) -> float:
        """CPU seconds (user + system) that munged, slurmctld and slurmd have used so far."""
        import psutil

        total = 0.0
        for pid in self.pids():
            with contextlib.suppress(psutil.Error):
                times = psutil.Process(pid).cpu_times()
                total += times.user + times.system
        return total

    # ------------------------------------------------------------------------------------------------ stop
    def stop(self) -> None:
        """Stop every daemon this cluster started (by its pid file, slurmd first), then remove its folder."""
        for pid in reversed(self.pids()):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            for _ in range(150):
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.1)
            else:
                os.kill(pid, signal.SIGKILL)
        self._pid_files = []
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None
