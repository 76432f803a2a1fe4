"""`python -m config.serve` (what `make run` runs) as a real process tree on the test database.

A worker cluster killed with SIGKILL comes back while the web server keeps answering; a stop,
or the supervisor's own SIGKILL, leaves no process of any child's group behind; groups left
by a run killed hard are ended by the next start. Linux: processes are read with psutil.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
import pytest
from django_q.models import Success
from django_q.tasks import async_task

from config.supervisor import RestartBudget
from tests.servers import ROOT, child_env, free_port, read_log, wait_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups are read from Linux's /proc")


@dataclass
class Served:
    proc: subprocess.Popen[bytes]
    base: str
    log_name: str
    seen: set[int] = field(default_factory=set)  # every process group of a child we saw, for the orphan checks

    def children(self) -> dict[str, psutil.Process]:
        """The supervisor's live children by role: "web", "worker", "watchdog"."""
        found: dict[str, psutil.Process] = {}
        try:
            children = psutil.Process(self.proc.pid).children()
        except psutil.NoSuchProcess:
            return found
        for child in children:
            try:
                command = " ".join(child.cmdline())
            except psutil.NoSuchProcess:
                continue
            role = "web" if "config.asgi" in command else "worker" if "qcluster" in command else "watchdog" if "watchdog" in command else None
            if role and child.status() != psutil.STATUS_ZOMBIE:
                found[role] = child
                self.seen.add(os.getpgid(child.pid))
        return found

    def log(self) -> str:
        return read_log(self.log_name)


def answers(base: str) -> bool:
    try:
        return httpx.get(f"{base}/healthz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def live_members(pgids: set[int]) -> list[str]:
    """"pid command" of every live (non-zombie) process whose group is one of ``pgids``."""
    found = []
    for process in psutil.process_iter(["pid", "status", "cmdline"]):
        try:
            if os.getpgid(process.pid) in pgids and process.info["status"] != psutil.STATUS_ZOMBIE:
                found.append(f"{process.pid} {' '.join(process.info['cmdline'] or [])}")
        except (ProcessLookupError, psutil.NoSuchProcess):
            continue
    return found


def group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return not live_members({pgid})  # only zombies left, waiting for their reaper


@contextmanager
def serve(data_dir: Path, log_name: str, port: int | None = None) -> Iterator[Served]:
    """``python -m config.serve`` on a free port; yields once the web answers and the cluster runs.

    Whatever the test does, every process group it started is SIGKILLed on the way out, so a
    failing test leaves no orphans either.
    """
    port = port or free_port()
    env = child_env(PORT=str(port), QUARRY_DATA_DIR=str(data_dir), QUARRY_WORKERS="1", REDIS_URL="")
    log_dir = ROOT / "var" / "test-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    with open(log_dir / f"{log_name}.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "config.serve"], cwd=ROOT, env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    served = Served(proc, f"http://127.0.0.1:{port}", log_name, {proc.pid})
    try:
        wait_for(lambda: proc.poll() is not None or (answers(served.base) and "] running." in served.log()), timeout=120,
                 what="the web server and the worker cluster")
        assert proc.poll() is None, served.log()[-3000:]
        roles = served.children()
        assert {"web", "worker"} <= set(roles), roles
        yield served
    finally:
        served.children()
        for pgid in served.seen:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if proc.poll() is None:
            proc.wait(timeout=10)


def successful_result(task_id: str) -> object | None:
    task = Success.objects.filter(id=task_id).first()
    return task.result if task else None


@pytest.mark.django_db(transaction=True)
def test_a_killed_worker_cluster_is_replaced_while_the_web_keeps_serving_and_a_stop_leaves_nothing(tmp_path: Path) -> None:
    with serve(tmp_path, "serve-restart") as served:
        first = served.children()["worker"]
        first_group = os.getpgid(first.pid)
        # The cluster's sentinel and workers share the leader's group; SIGKILL reaches the leader only.
        assert len(live_members({first_group})) >= 2
        first.kill()
        second = wait_for(lambda: (w := served.children().get("worker")) and w.pid != first.pid and w,
                          timeout=60, what="a new worker cluster")
        assert answers(served.base), "the web server kept serving"
        assert served.proc.poll() is None
        wait_for(lambda: group_gone(first_group), timeout=30, what="the old cluster's sentinel and workers to be ended")
        # The new cluster works: it runs a task from the database queue.
        task_id = async_task("config.tasks.worker_ping", "after-restart")
        assert wait_for(lambda: successful_result(task_id), timeout=90, what="a task on the new cluster") == "after-restart"
        assert os.getpgid(second.pid) == second.pid != first_group, "the new cluster leads its own group"
        groups = set(served.seen)

        served.proc.send_signal(signal.SIGTERM)
        assert served.proc.wait(timeout=40) == 0
        assert live_members(groups - {served.proc.pid}) == []
        assert "[serve] stopped" in served.log()
        assert not (tmp_path / "serve.json").exists()


@pytest.mark.django_db(transaction=True)
def test_a_killed_supervisor_leaves_no_orphans(tmp_path: Path) -> None:
    with serve(tmp_path, "serve-supervisor-killed") as served:
        groups = {os.getpgid(p.pid) for role, p in served.children().items() if role != "watchdog"}
        served.proc.kill()
        served.proc.wait(timeout=10)
        # The watchdog sees the supervisor's pipe close and ends both groups, then itself.
        wait_for(lambda: not live_members(groups | set(served.seen) - {served.proc.pid}), timeout=40,
                 what="the children's groups and the watchdog to end")


@pytest.mark.django_db(transaction=True)
def test_the_next_start_ends_the_groups_of_a_run_killed_hard_and_refuses_beside_a_live_one(tmp_path: Path) -> None:
    port = free_port()
    with serve(tmp_path, "serve-killed-hard", port=port) as earlier:
        roles = earlier.children()
        groups = {os.getpgid(roles["web"].pid), os.getpgid(roles["worker"].pid)}
        # A second start beside a live supervisor would run a second cluster on the same database.
        beside = subprocess.run([sys.executable, "-m", "config.serve"], cwd=ROOT, capture_output=True, text=True, timeout=60,
                                env=child_env(PORT=str(free_port()), QUARRY_DATA_DIR=str(tmp_path)))
        assert beside.returncode == 1 and f"pid {earlier.proc.pid}" in beside.stderr
        # Killed hard, watchdog included (a container stopped, `kill -9 -1`): the children live on, headless.
        roles["watchdog"].kill()  # (a zombie until its parent, killed next, is gone)
        earlier.proc.kill()
        earlier.proc.wait(timeout=10)
        assert all(live_members({pgid}) for pgid in groups)
        with serve(tmp_path, "serve-after-hard-kill", port=port) as later:
            assert "left running by an earlier run that was killed hard" in later.log()
            assert live_members(groups) == []
            assert answers(later.base)


@pytest.mark.django_db(transaction=True)
def test_a_dead_web_server_stops_everything_with_its_status(tmp_path: Path) -> None:
    with serve(tmp_path, "serve-web-killed") as served:
        roles = served.children()
        groups = {os.getpgid(roles["web"].pid), os.getpgid(roles["worker"].pid)}
        roles["web"].kill()
        assert served.proc.wait(timeout=40) == 128 + signal.SIGKILL, "reported as a shell reports a signal's death"
        assert "the web server exited with status -9" in served.log()
        assert live_members(groups) == []


def test_restarts_back_off_and_stop_after_the_budget() -> None:
    budget = RestartBudget(limit=3, window=60, first_delay=1, max_delay=3)
    assert [budget.next_delay(0), budget.next_delay(2), budget.next_delay(5)] == [1, 2, 3]
    assert budget.next_delay(10) is None, "a fourth death within the window gives up"
    assert budget.next_delay(70) == 1, "restarts older than the window no longer count"
