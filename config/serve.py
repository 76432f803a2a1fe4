"""`python -m config.serve`: the ASGI server and one django-q2 cluster, supervised together.

Used by ``make run``. Once the server answers, it prints the URLs, the demo login and
the API token (from ``var/demo.json``, written by ``manage.py demo_setup``) as the last
thing on the screen. Ctrl-C (SIGINT) or SIGTERM stops both children; if either child
exits on its own, the other is stopped too and the exit status is kept, so a broken
start never leaves half a system running. The embedded PostgreSQL is not a child: it
keeps running for the next start (``make stop`` stops it).
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

from config.development import load_development_env


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


def banner(saved: dict[str, str], base: str) -> str:
    """What ``make run`` prints once the server answers: where to go and how to sign in."""
    token = saved.get("token", "")
    return "\n".join([
        "",
        "Quarry is running (Ctrl-C stops the web server and the worker; `make stop` stops the database):",
        f"  web chat   {base}/",
        f"  admin      {base}/admin/   login {saved.get('username', '')} / {saved.get('password', '')}",
        f"  API docs   {base}/v1/docs   (and {base}/v1/redoc)",
        f"  API token  {token}   (tenant {saved.get('tenant', '')}, role admin)",
        f"  try        curl -H 'Authorization: Bearer {token}' {base}/v1/me",
        "",
    ])


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


def main() -> int:
    load_development_env()  # the same DEBUG and SECRET_KEY as the README's manage.py commands
    port = int(os.environ.get("PORT", "8000"))
    host = os.environ.get("QUARRY_HOST", "127.0.0.1")
    if _port_taken(host, port):
        # Uvicorn would fail after the worker started and the message would scroll past in its log.
        print(f"[serve] {host}:{port} is already in use (another `make run`?): stop it, or choose another port "
              f"with PORT=8001 make run", file=sys.stderr)
        return 1
    children: dict[str, subprocess.Popen[bytes]] = {}
    stopping = False

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    worker_ready = threading.Event()
    for name, argv in _commands(port, host).items():
        # Own process group: the terminal's Ctrl-C reaches us once, and we stop children in order.
        if name == "worker":
            # Its log passes through us, so the banner can wait for the cluster to be running.
            child = subprocess.Popen(argv, start_new_session=True, stderr=subprocess.PIPE)
            threading.Thread(target=_forward, args=(child.stderr, worker_ready), daemon=True).start()
        else:
            child = subprocess.Popen(argv, start_new_session=True)
        children[name] = child
    status = 0
    announced = False
    base = f"http://{host}:{port}"
    demo = Path(os.environ.get("QUARRY_DATA_DIR") or Path(__file__).resolve().parent.parent / "var") / "demo.json"
    try:
        while not stopping:
            if not announced and worker_ready.is_set() and _answers(f"{base}/healthz"):
                announced = True
                saved = json.loads(demo.read_text()) if demo.exists() else {}
                print(banner(saved, base) if saved else f"Quarry is running on {base}/", flush=True)
            for name, child in children.items():
                code = child.poll()
                if code is not None:
                    print(f"[serve] {name} exited with status {code}; stopping the rest", file=sys.stderr)
                    status = code or 1
                    stopping = True
                    break
            time.sleep(0.2)
    finally:
        for child in children.values():
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 15
        for child in children.values():
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
    print("[serve] stopped", file=sys.stderr)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
