"""Every process a trial starts, however detached, and how to end them all.

A workload's children may leave the trial's process group (``setsid``,
``start_new_session=True``, a double-forked daemon), so stopping the group is not enough.
:class:`ProcessTree` finds a trial's processes three ways, and ends the union:

1. **A cgroup** (v2, where this process may create one under its own: a delegated cgroup,
   e.g. a systemd user session): the trial's first process is moved into a new child
   cgroup right after it starts, before it runs any workload code, and every process it
   starts stays in it whatever it does. Ending the trial writes ``cgroup.kill`` (Linux 5.14+)
   and signals every process ``cgroup.procs`` lists.
2. **The process tree in /proc**: every process whose parent chain leads to the trial's
   first process, or that is in its process group, recorded at every poll (so a child
   whose parent exits between two polls is still known) and again when ending.
3. **A marker in the environment**: each trial runs with ``TRACEDOC_TRIAL_MARKER`` set to a
   random token its children inherit; a process whose ``/proc/PID/environ`` carries it is
   the trial's even after it was re-parented to init (a daemon). A process that replaced its
   whole environment and left the tree before a poll saw it is the one case this misses;
   the cgroup does not miss it.

A process is named by its PID and its start time (``/proc/PID/stat`` field 22), so a PID
reused by an unrelated process is never signalled. This process and its ancestors are never
signalled. Without ``/proc`` (not Linux) only the process group is ended.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

#: The environment variable holding a trial's marker token (set by the runner, inherited by
#: every process the trial starts; read only from other processes' ``/proc/PID/environ``).
MARKER_ENV = "TRACEDOC_TRIAL_MARKER"

PROC = Path("/proc")
CGROUP_ROOT = Path("/sys/fs/cgroup")

Ident = tuple[int, int]  # (pid, start time in clock ticks since boot)


def _stat(pid: int, proc: Path = PROC) -> tuple[int, int, int, str] | None:
    """``(ppid, pgid, start time, state)`` of ``pid`` from ``/proc/PID/stat``; None when gone."""
    try:
        text = (proc / str(pid) / "stat").read_text()
    except (OSError, ValueError):
        return None
    fields = text[text.rfind(")") + 2 :].split()  # after "pid (comm) "; comm may hold spaces
    try:
        return int(fields[1]), int(fields[2]), int(fields[19]), fields[0]
    except (IndexError, ValueError):
        return None


def _all_pids(proc: Path = PROC) -> list[int]:
    try:
        return [int(e) for e in os.listdir(proc) if e.isdigit()]
    except OSError:
        return []


def _own_cgroup(proc: Path = PROC) -> str | None:
    """This process' cgroup v2 path (``0::/path``), None on a v1-only host or without /proc."""
    try:
        for line in (proc / "self" / "cgroup").read_text().splitlines():
            if line.startswith("0::"):
                return line[3:].strip() or "/"
    except OSError:
        pass
    return None


class ProcessTree:
    """The processes of one trial (see the module docstring).

    Args:
        marker: the trial's random token (the value of :data:`MARKER_ENV` in its environment).
        cgroup_root: the cgroup v2 mount (tests give a folder of their own); None: no cgroup.
        proc: the proc file system (tests may give another).
    """

    def __init__(self, marker: str, cgroup_root: Path | None = CGROUP_ROOT, proc: Path = PROC) -> None:
        self.marker = marker
        self.proc = proc
        self.cgroup_root = cgroup_root
        self.cgroup: Path | None = None
        self.root: Ident | None = None
        self.seen: set[Ident] = set()
        self._protected = self._ancestors()

    def _ancestors(self) -> set[int]:
        out, pid = set(), os.getpid()
        while pid > 1 and pid not in out:
            out.add(pid)
            st = _stat(pid, self.proc)
            pid = st[0] if st else 0
        return out

    def attach(self, pid: int) -> None:
        """Follow the trial whose first process is ``pid`` (call right after it started)."""
        st = _stat(pid, self.proc)
        self.root = (pid, st[2] if st else -1)
        self.cgroup = self._make_cgroup(pid)
        self.scan()

    def _make_cgroup(self, pid: int) -> Path | None:
        """A new cgroup under this process' own holding ``pid``, or None where none can be made
        (no cgroup v2, no write access, or a parent that may not hold processes and children)."""
        own = _own_cgroup(self.proc) if self.cgroup_root is not None else None
        if own is None or self.cgroup_root is None:
            return None
        parent = self.cgroup_root / own.lstrip("/")
        if not (parent / "cgroup.procs").is_file():
            return None
        path = parent / f"tracedoc-trial-{os.getpid()}-{self.marker[:12]}"
        try:
            path.mkdir()
        except OSError:
            return None
        try:
            (path / "cgroup.procs").write_text(f"{pid}\n")
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            return None
        return path

    def _is_ours(self, pid: int) -> bool:
        try:
            env = (self.proc / str(pid) / "environ").read_bytes()
        except OSError:
            return False
        return f"{MARKER_ENV}={self.marker}".encode() in env.split(b"\0")

    def scan(self, environ: bool = False) -> set[Ident]:
        """The trial's live processes now (recording each in :attr:`seen`): the tree below its
        first process and its process group, the cgroup's members, and with ``environ`` every
        process carrying the marker (slower: reads every process' environment)."""
        stats = {pid: st for pid in _all_pids(self.proc) if (st := _stat(pid, self.proc)) is not None}
        live = {(pid, st[2]) for pid, st in stats.items() if st[3] not in ("Z", "X")}
        found: set[Ident] = set()
        if self.root is not None:
            root_pid = self.root[0]
            children: dict[int, list[int]] = {}
            for pid, st in stats.items():
                children.setdefault(st[0], []).append(pid)
                if st[1] == root_pid:  # the trial's process group
                    found.add((pid, st[2]))
            stack = [root_pid]
            while stack:
                pid = stack.pop()
                if pid in stats:
                    found.add((pid, stats[pid][2]))
                stack.extend(children.get(pid, ()))
        found |= {(pid, stats[pid][2]) for pid in self._cgroup_pids() if pid in stats}
        if environ:
            found |= {(pid, st[2]) for pid, st in stats.items() if (pid, st[2]) in live and self._is_ours(pid)}
        self.seen |= found
        return {i for i in self.seen if i in live and i[0] not in self._protected}

    def _cgroup_pids(self) -> list[int]:
        if self.cgroup is None:
            return []
        try:
            return [int(x) for x in (self.cgroup / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return []

    def signal(self, sig: int) -> int:
        """Send ``sig`` to every live process of the trial; returns how many were signalled."""
        targets = self.scan(environ=True)
        if sig == signal.SIGKILL and self.cgroup is not None:
            with contextlib.suppress(OSError):
                (self.cgroup / "cgroup.kill").write_text("1\n")
        n = 0
        for pid, _ in targets:
            try:
                os.kill(pid, sig)
                n += 1
            except (ProcessLookupError, PermissionError):
                pass
        return n

    def alive(self) -> bool:
        """Whether any process of the trial is still running (zombies do not count)."""
        return bool(self.scan(environ=True))

    def end(self, grace_s: float) -> None:
        """SIGTERM every process of the trial, SIGKILL what is left after ``grace_s`` seconds,
        then remove the cgroup. An interrupt during the grace period sends SIGKILL at once and
        is re-raised."""
        try:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                if not self.signal(sig):
                    break
                deadline = time.monotonic() + (grace_s if sig == signal.SIGTERM else 2.0)
                while time.monotonic() < deadline and self.alive():
                    time.sleep(0.05)
                if not self.alive():
                    break
        except BaseException:
            self.signal(signal.SIGKILL)
            raise
        finally:
            self.close()

    def close(self) -> None:
        """Remove the trial's cgroup (when empty; it is left otherwise)."""
        if self.cgroup is not None:
            with contextlib.suppress(OSError):
                self.cgroup.rmdir()
