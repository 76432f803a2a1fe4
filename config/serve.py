"""`python -m config.serve`: the ASGI server and one django-q2 cluster, supervised together.

Used by ``make run``. Once the server answers, it prints the URLs, the demo login and
the API token (from ``var/demo.json``, written by ``manage.py demo_setup``) as the last
thing on the screen. The embedded PostgreSQL is not a child: it keeps running for the
next start (``make stop`` stops it).

What it guarantees (POSIX; the leftover check is Linux only, see config/supervisor.py):

- Each child runs in its own process group, and "stopping a child" ends its whole group.
- The worker cluster dying (a crash, the OOM killer, ``kill -9``) ends what is left of its
  group and starts a new cluster after a backoff (1 s, 2 s, 4 s ...); the web server keeps
  serving. More than ``RestartBudget.limit`` restarts within its window means the cluster
  is broken: everything stops with status 1 and says so.
- The web server dying stops everything with its exit status (128 + N for signal N):
  without it there is nothing to use, and a crash at start (a bad setting, a failed
  lifespan) must not scroll by while a worker keeps running.
- Ctrl-C (SIGINT), SIGTERM or SIGHUP ends every child's group (SIGTERM, SIGKILL after a
  grace period). If this process itself dies without doing so (even by SIGKILL), a small
  watchdog process ends the groups.
- ``var/serve.json`` records this process and its groups. A start that finds the groups of
  an earlier run whose supervisor and watchdog were both killed hard ends them (they are
  headless, and a second cluster would take tasks from the same database); a start that
  finds that run's supervisor still alive refuses, naming its pid.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from types import FrameType
from typing import IO

from common.banner import banner
from config.development import BASE_DIR, load_development_env
from config.supervisor import Group, RestartBudget, Watchdog, end_groups, group_commands, process_command


def _commands(port: int, host: str) -> dict[str, list[str]]:
    python = sys.executable
    return {
        "web": [
            python, "-m", "uvicorn", "config.asgi:application",
            "--host", host, "--port", str(port), "--ws", "websockets-sansio", "--no-server-header",
            # config.asgi's outer router answers lifespan (Django and Channels do not): it starts and
            # stops the MCP session manager; "on" makes a failed start stop the server.
            "--lifespan", "on",
        ],
        "worker": [python, "manage.py", "qcluster"],
    }


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:  # noqa: S310 - our own loopback URL
            return response.status == 200
    except OSError:
        return False


def _forward(stream: IO[bytes] | None, ready: threading.Event) -> None:
    """Copy the worker's log to our stderr; set ``ready`` once its cluster says it is running."""
    if stream is None:
        ready.set()
        return
    for line in iter(stream.readline, b""):
        sys.stderr.buffer.write(line)
        sys.stderr.flush()
        if b"] running." in line:  # django-q2: "Q Cluster <name> [<queue>] running."
            ready.set()
    ready.set()  # the worker ended: main() notices and stops


def _port_taken(host: str, port: int) -> bool:
    """Whether something already listens on ``host:port`` (another ``make run``, say)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.settimeout(1)
        return probe.connect_ex((host, port)) == 0


# How each child's processes show in their command lines (django-q2 titles every process "qcluster ...").
_MARKERS = {"web": "config.asgi", "worker": "qcluster"}


def _write_state(path: Path, groups: dict[str, Group], watchdog: Watchdog) -> None:
    """Record this supervisor and its groups, for the next start to find if we are killed hard."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps({
        "supervisor": os.getpid(), "watchdog": watchdog.process.pid,
        "groups": {name: group.pgid for name, group in groups.items()},
    }))
    temporary.replace(path)  # atomic: a reader never sees half a file


def _clear_leftovers(path: Path) -> str | None:
    """End the groups an earlier run left behind; a refusal message when that run is still supervised.

    Only groups recorded in ``path`` whose live processes still carry our children's command
    lines are ended: a pgid the system reused for something else is left alone.
    """
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError):
        return None  # no earlier run, or a file cut short: nothing to go by
    supervisor = int(saved.get("supervisor") or 0)
    if supervisor and supervisor != os.getpid() and "config.serve" in process_command(supervisor):
        return (f"[serve] another `python -m config.serve` (pid {supervisor}) is running from this directory "
                f"({path}); two would run two worker clusters on one database. Stop it first (Ctrl-C in its "
                f"terminal, or kill {supervisor}).")
    left = [Group(name, int(pgid)) for name, pgid in (saved.get("groups") or {}).items()
            if name in _MARKERS and any(_MARKERS[name] in command for command in group_commands(int(pgid)))]
    if left:
        print(f"[serve] ending {', '.join(f'the {g.name} (process group {g.pgid})' for g in left)} left running by an "
              f"earlier run that was killed hard: nothing supervises them any more, and a second worker cluster "
              f"would take tasks from the same database", file=sys.stderr)
        end_groups(left)
    return None


def _start(name: str, argv: list[str], worker_ready: threading.Event) -> Group:
    # Own session and process group: the terminal's Ctrl-C reaches us once, and ending the
    # group ends everything the child forked (django-q2's sentinel and workers).
    if name == "worker":
        # Its log passes through us, so the banner can wait for the cluster to be running.
        child = subprocess.Popen(argv, start_new_session=True, stderr=subprocess.PIPE)
        threading.Thread(target=_forward, args=(child.stderr, worker_ready), daemon=True).start()
    else:
        child = subprocess.Popen(argv, start_new_session=True)
    return Group(name, child.pid, child)


def main() -> int:
    load_development_env()  # the same DEBUG and SECRET_KEY as the README's manage.py commands
    port = int(os.environ.get("PORT", "8000"))
    host = os.environ.get("QUARRY_HOST", "127.0.0.1")
    data_dir = Path(os.environ.get("QUARRY_DATA_DIR") or BASE_DIR / "var")
    state = data_dir / "serve.json"
    refusal = _clear_leftovers(state)
    if refusal:
        print(refusal, file=sys.stderr)
        return 1
    if _port_taken(host, port):
        # Uvicorn would fail after the worker started and the message would scroll past in its log.
        print(f"[serve] {host}:{port} is already in use (another `make run`?): stop it, or choose another port "
              f"with PORT=8001 make run", file=sys.stderr)
        return 1
    stopping = False

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, stop)
    commands = _commands(port, host)
    worker_ready = threading.Event()
    watchdog = Watchdog()
    groups: dict[str, Group] = {}

    def start(name: str) -> None:
        group = _start(name, commands[name], worker_ready)
        watchdog.watch(group)  # before anything else can fail: from here on the group is never orphaned
        groups[name] = group
        _write_state(state, groups, watchdog)

    status = 0
    announced = False
    base = f"http://{host}:{port}"
    demo = data_dir / "demo.json"
    budget = RestartBudget()
    restart_at: float | None = None
    try:
        start("web")
        start("worker")
        while not stopping:
            if not announced and worker_ready.is_set() and _answers(f"{base}/healthz"):
                announced = True
                saved = json.loads(demo.read_text()) if demo.exists() else {}
                print(banner(saved, base) if saved else f"Quarry is running on {base}/", flush=True)
            code = groups["web"].leader.poll()  # type: ignore[union-attr]
            if code is not None:
                print(f"[serve] the web server exited with status {code}; stopping the worker cluster too",
                      file=sys.stderr)
                # A signal's death as a shell reports it (SIGKILL: 137), not Python's negative number (make: 247).
                status = 128 - code if code < 0 else code or 1
                break
            worker = groups.get("worker")
            code = worker.leader.poll() if worker is not None else None  # type: ignore[union-attr]
            if worker is not None and code is not None:
                print(f"[serve] the worker cluster exited with status {code}; ending the rest of its process group "
                      f"{worker.pgid}", file=sys.stderr)
                end_groups([worker])
                watchdog.forget(worker)
                del groups["worker"]
                _write_state(state, groups, watchdog)
                delay = budget.next_delay(time.monotonic())
                if delay is None:
                    print(f"[serve] the worker cluster died {budget.limit} times within {budget.window:.0f} s: giving "
                          f"up and stopping everything (its log above says why)", file=sys.stderr)
                    status = 1
                    break
                print(f"[serve] starting a new worker cluster in {delay:.0f} s; the web server keeps serving",
                      file=sys.stderr)
                restart_at = time.monotonic() + delay
            if restart_at is not None and time.monotonic() >= restart_at:
                restart_at = None
                start("worker")
            time.sleep(0.2)
    finally:
        end_groups(list(groups.values()))
        for group in groups.values():
            watchdog.forget(group)
        watchdog.close()
        state.unlink(missing_ok=True)
    print("[serve] stopped", file=sys.stderr)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
