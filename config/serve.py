"""`python -m config.serve`: the ASGI server and one django-q2 cluster, supervised together.

Used by ``make run``. Ctrl-C (SIGINT) or SIGTERM stops both children; if either
child exits on its own, the other is stopped too and the exit status is kept, so
a broken start never leaves half a system running.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from types import FrameType


def _commands(port: int, host: str) -> dict[str, list[str]]:
    python = sys.executable
    return {
        "web": [
            python, "-m", "uvicorn", "config.asgi:application",
            "--host", host, "--port", str(port), "--ws", "websockets", "--no-server-header",
        ],
        "worker": [python, "manage.py", "qcluster"],
    }


def main() -> int:
    port = int(os.environ.get("PORT", "8000"))
    host = os.environ.get("QUARRY_HOST", "127.0.0.1")
    children: dict[str, subprocess.Popen[bytes]] = {}
    stopping = False

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    for name, argv in _commands(port, host).items():
        # Own process group: the terminal's Ctrl-C reaches us once, and we stop children in order.
        children[name] = subprocess.Popen(argv, start_new_session=True)
    status = 0
    try:
        while not stopping:
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
