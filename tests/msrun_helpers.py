"""Helpers of the tests that start ``msrun`` jobs: free ports, and killing what a job started."""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
from pathlib import Path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def descendants(pid: int) -> list[int]:
    """Processes started by ``pid`` and by them, read from /proc (msrun puts workers in new sessions)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def worker_logs(paths: list[Path], root: Path) -> str:
    """The end of each worker log in ``paths``, without MindSpore's chatter, headed by its path under ``root``."""
    return "\n".join(f"--- {path.relative_to(root)}\n" + without_chatter(path.read_text(errors="replace"))[-3000:]
                     for path in sorted(paths))


def without_chatter(log: str) -> str:
    """A worker log without MindSpore's [INFO] and [WARNING] lines."""
    return "\n".join(line for line in log.splitlines() if not line.startswith(("[INFO]", "[WARNING]")))


def end_job(job: subprocess.Popen) -> None:
    """Kill what ``job`` started, then ``job`` itself, by process id, whichever way it ended."""
    kill(descendants(job.pid))
    if job.poll() is None:
        kill([job.pid])
        job.wait()
