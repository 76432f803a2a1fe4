"""Children as whole process groups: start, end, restart with a budget, and a watchdog for hard deaths.

POSIX; the leftover check reads ``/proc`` and so is Linux only. Each child leads its own session
(``start_new_session``), so its process group holds everything it forks: uvicorn's process, or
django-q2's leader, sentinel and workers. Ending a child means ending its group, because a
django-q2 leader killed with SIGKILL leaves its sentinel and workers running under PID 1, still
taking tasks, and a second cluster would then work on the same database.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

# Seconds a child has to stop on SIGTERM before its group gets SIGKILL. A django-q2 cluster
# waits for its workers' current tasks; an embedding batch takes a few seconds.
GRACE = 10.0
# After a leader exits, the rest of its group gets this long on SIGTERM before SIGKILL.
STRAGGLER_GRACE = 2.0


def group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` exists (a zombie not yet reaped counts)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists; someone else's, so not ours to signal
    return True


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


@dataclass
class Group:
    """A child's process group: ``pgid`` is the leader's pid; ``leader`` is None when we did not start it."""

    name: str
    pgid: int
    leader: subprocess.Popen[bytes] | None = None

    def leader_running(self) -> bool:
        if self.leader is not None:
            # poll() also reaps a dead leader, so its zombie no longer keeps the group "alive".
            return self.leader.poll() is None
        # Not our child (the watchdog's groups, an earlier run's): the leader's pid is the pgid, and
        # the kernel gives no new process a pid that still names a live group.
        try:
            os.kill(self.pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def alive(self) -> bool:
        self.leader_running()
        return group_alive(self.pgid)


def _wait(groups: Iterable[Group], running: Callable[[Group], bool], until: float) -> None:
    """Poll until no group in ``groups`` is ``running``, or ``until`` (a monotonic time) passes."""
    pending = list(groups)
    while pending and time.monotonic() < until:
        pending = [g for g in pending if running(g)]
        if pending:
            time.sleep(0.05)


def end_groups(groups: Sequence[Group], grace: float = GRACE) -> None:
    """End every process of every group in ``groups``, in parallel; returns once none is left (or, in
    the worst case, 5 s after SIGKILL: a process in uninterruptible sleep dies when its I/O ends).

    A live leader gets SIGTERM alone first and up to ``grace`` seconds: a django-q2 leader stops its
    sentinel and workers in order, and SIGTERM to them as well cuts that short and it hangs in its
    shutdown. Then whatever is left in a group (all of it when the leader was already dead) gets
    SIGTERM, and SIGKILL after a short grace. Never raises for a group that is already gone.
    """
    deadline = time.monotonic() + grace
    led = [g for g in groups if g.leader_running()]
    for g in led:
        try:
            os.kill(g.pgid, signal.SIGTERM)  # the leader alone
        except ProcessLookupError:
            pass
    _wait(led, Group.leader_running, deadline)
    rest = [g for g in groups if g.alive()]
    for g in rest:
        _signal_group(g.pgid, signal.SIGTERM)
    _wait(rest, Group.alive, max(deadline, time.monotonic() + STRAGGLER_GRACE))
    for g in groups:
        if g.alive():
            _signal_group(g.pgid, signal.SIGKILL)
    _wait(groups, Group.alive, time.monotonic() + 5)  # SIGKILL cannot be refused; this only waits for reaping


@dataclass
class RestartBudget:
    """When a crashed child may start again: exponential backoff, and at most ``limit`` restarts per ``window`` s.

    ``next_delay(now)`` returns the seconds to wait before the next restart and counts it, or None
    once ``limit`` restarts happened within the last ``window`` seconds: a child that keeps dying
    is broken (configuration, database), and restarting it forever would hide that.
    """

    limit: int = 5
    window: float = 60.0
    first_delay: float = 1.0
    max_delay: float = 30.0
    _starts: deque[float] = field(default_factory=deque)

    def next_delay(self, now: float) -> float | None:
        while self._starts and now - self._starts[0] > self.window:
            self._starts.popleft()
        if len(self._starts) >= self.limit:
            return None
        delay = min(self.max_delay, self.first_delay * 2 ** len(self._starts))
        self._starts.append(now + delay)
        return delay


# --- the watchdog: ends the groups when the supervisor dies, SIGKILL included ---------------------------


class Watchdog:
    """A separate process that ends the children's groups if the supervisor dies without doing so.

    The supervisor tells it each group as it starts (``+pgid``) and ends (``-pgid``) over a pipe
    that only the supervisor holds open; end of file (the supervisor exited or was killed, even
    with SIGKILL) makes the watchdog end every group still announced, then exit. It runs in its
    own session, so the terminal's Ctrl-C, meant for the supervisor, does not stop it first.
    """

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "config.supervisor", "watchdog"], stdin=subprocess.PIPE, start_new_session=True,
        )

    def _send(self, line: str) -> None:
        stdin = self.process.stdin
        if stdin is not None and not stdin.closed:
            try:
                stdin.write(line.encode() + b"\n")
                stdin.flush()
            except BrokenPipeError:
                pass  # the watchdog died: the supervisor still ends its children itself

    def watch(self, group: Group) -> None:
        self._send(f"+{group.pgid}")

    def forget(self, group: Group) -> None:
        self._send(f"-{group.pgid}")

    def close(self) -> None:
        """After the supervisor ended its groups: the watchdog has nothing left to do and exits."""
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=GRACE + STRAGGLER_GRACE + 5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def watchdog_main(stream: IO[bytes]) -> int:
    """The watchdog process: read ``+pgid``/``-pgid`` lines until end of file, then end what is left."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    watched: dict[int, None] = {}  # insertion-ordered set
    for line in iter(stream.readline, b""):
        text = line.decode().strip()
        if text[:1] == "+":
            watched[int(text[1:])] = None
        elif text[:1] == "-":
            watched.pop(int(text[1:]), None)
    left = [Group(name="child", pgid=pgid) for pgid in watched if group_alive(pgid)]
    if left:
        print(f"[serve] the supervisor is gone; ending its children's process groups {sorted(watched)}", file=sys.stderr)
        end_groups(left)
    return 0


# --- leftovers of a run that was killed hard ---------------------------------------------------------


def group_commands(pgid: int) -> list[str]:
    """The command lines of the live (non-zombie) processes of group ``pgid``; Linux (``/proc``) only."""
    found: list[str] = []
    try:
        entries = list(Path("/proc").iterdir())
    except OSError:
        return found  # no /proc (not Linux): leftovers cannot be recognised, so none is ended
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses, so split after its last ")".
            state, _ppid, pgrp = stat.rpartition(")")[2].split()[:3]
            if int(pgrp) != pgid or state == "Z":
                continue
            found.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip())
        except (OSError, ValueError):
            continue  # the process ended while we looked
    return found


def process_command(pid: int) -> str:
    """``pid``'s command line, or "" when no such (live) process exists."""
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


if __name__ == "__main__":
    if sys.argv[1:] == ["watchdog"]:
        raise SystemExit(watchdog_main(sys.stdin.buffer))
    raise SystemExit("usage: python -m config.supervisor watchdog")
