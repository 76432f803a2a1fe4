"""How long Quarry takes to start: management commands, and a second ``make run`` to its banner, as JSON.

    .venv/bin/python bench/startup.py [--runs 5] [--port 8199] [--no-serve]

Each command runs ``--runs`` times in a fresh process, one after another, on the database of
``make run`` (the embedded one unless ``DATABASE_URL`` says otherwise; run ``make run`` once
first, so the database, the demo and ``var/development.env`` exist). Reported per command: the
median and the fastest wall-clock seconds, and the median CPU seconds the process used (user +
system), which other work on the machine inflates less than wall-clock time.

- ``python -c pass``: the interpreter alone, the floor under every command.
- ``manage.py help``: settings, ``django.setup()`` (every app, the admin's modules).
- ``manage.py check``: that, plus the system checks, which import the whole URLconf (every view).
- ``make run``'s steps on a second run, each alone: ``migrate`` with nothing to apply, ``collectstatic``
  with nothing changed, ``demo_setup`` and ``demo_corpus`` with the demo present; then all four in one
  process, as ``make run`` runs them (``python -m config.prepare``).
- ``make run`` to its banner (unless ``--no-serve``): the whole command, from ``make`` to the
  "Quarry is running" line, then Ctrl-C. It needs ``--port`` free and no other ``make run`` from
  this checkout.

Load from other processes moves the wall-clock figures a lot on a small machine: the load
averages before and after are part of the result.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence

from _common import ROOT, emit

PYTHON = sys.executable
COMMANDS: dict[str, list[str]] = {
    "python -c pass": [PYTHON, "-c", "pass"],
    "manage.py help": [PYTHON, "manage.py", "help"],
    "manage.py check": [PYTHON, "manage.py", "check"],
    "manage.py migrate (nothing to apply)": [PYTHON, "manage.py", "migrate", "--noinput", "--verbosity", "0"],
    "manage.py collectstatic (unchanged)": [PYTHON, "manage.py", "collectstatic", "--noinput", "--verbosity", "0"],
    "manage.py demo_setup --quiet (demo present)": [PYTHON, "manage.py", "demo_setup", "--quiet"],
    "manage.py demo_corpus (demo present)": [PYTHON, "manage.py", "demo_corpus"],
    "python -m config.prepare (second run)": [PYTHON, "-m", "config.prepare"],
}
BANNER = b"Quarry is running"


def environment() -> dict[str, str]:
    """What ``make run`` exports (offline model libraries), over this process's environment."""
    return {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "ORT_DISABLE_TELEMETRY": "1", "HF_HUB_OFFLINE": "1"}


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_command(argv: Sequence[str], env: Mapping[str, str]) -> tuple[float, float]:
    """Wall-clock and CPU seconds of one run of ``argv``; a failing command stops the benchmark."""
    cpu = children_cpu()
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, env=dict(env), capture_output=True, timeout=600)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed with {done.returncode}:\n{done.stderr.decode(errors='replace')[-2000:]}")
    return wall, children_cpu() - cpu


def make_run_to_banner(port: int, env: Mapping[str, str]) -> float:
    """Seconds from starting ``make run`` to its banner; then stops it as Ctrl-C would."""
    started = time.perf_counter()
    proc = subprocess.Popen(["make", "run"], cwd=ROOT, env={**env, "PORT": str(port)}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    assert proc.stdout is not None
    seen = b""
    try:
        for line in iter(proc.stdout.readline, b""):
            seen += line
            if BANNER in line:
                return time.perf_counter() - started
        raise SystemExit(f"make run ended without its banner:\n{seen.decode(errors='replace')[-3000:]}")
    finally:
        os.killpg(proc.pid, signal.SIGINT)  # its own session: the supervisor ends the server and the worker
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def summarise(walls: Sequence[float], cpus: Sequence[float] = ()) -> dict[str, float]:
    result = {"median_s": round(statistics.median(walls), 2), "min_s": round(min(walls), 2)}
    if cpus:
        result["median_cpu_s"] = round(statistics.median(cpus), 2)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each command (the median is reported)")
    parser.add_argument("--port", type=int, default=8199, help="the port of the timed `make run`")
    parser.add_argument("--no-serve", action="store_true", help="time the commands only, not `make run`")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    env = environment()
    load_before = os.getloadavg()
    commands: dict[str, dict[str, float]] = {}
    for name, argv in COMMANDS.items():
        time_command(argv, env)  # a first run writes bytecode and warms the file cache, as a second `make run` finds them
        walls, cpus = zip(*(time_command(argv, env) for _ in range(args.runs)), strict=True)
        commands[name] = summarise(walls, cpus)
    result: dict[str, object] = {
        "runs": args.runs,
        "cores": os.cpu_count(),
        "load_before": [round(v, 2) for v in load_before],
        "bytecode_written": not sys.flags.dont_write_bytecode and not os.environ.get("PYTHONDONTWRITEBYTECODE"),
        "commands": commands,
    }
    if not args.no_serve:
        result["make_run_to_banner"] = summarise([make_run_to_banner(args.port, env) for _ in range(args.runs)])
    result["load_after"] = [round(v, 2) for v in os.getloadavg()]
    emit(result)


if __name__ == "__main__":
    main()
