"""Log filters that keep routine traffic out of an INFO log.

At INFO the log says what changed and what failed; what happens every few seconds as a
matter of course (health probes, the admin's progress poll, static files, the task
runner's per-task lines) is DEBUG. Errors and failures are never demoted.
"""

from __future__ import annotations

import logging
import re

# uvicorn's access lines: '%s - "%s %s HTTP/%s" %d' with (client, method, path, version, status).
ROUTINE_PATHS = re.compile(r"^/(healthz|readyz|static/|favicon|admin/knowledge/document/progress/)")
# django-q2's per-task lines; its failures ("Failed ...") are ERROR and stay.
# Also the start-up line of each of its processes; the cluster's own "starting" / "running" stay.
ROUTINE_TASK_LINES = re.compile(
    r"( processing |^Processed |created task .* from schedule|^Enqueued | ready for work at | monitoring at "
    r"| guarding cluster | pushing tasks at )"
)


class _Demote(logging.Filter):
    """Turns matching INFO records into DEBUG ones, shown only where DEBUG is enabled."""

    def routine(self, record: logging.LogRecord) -> bool:
        raise NotImplementedError

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.INFO or not self.routine(record):
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger().isEnabledFor(logging.DEBUG)


class RoutineRequests(_Demote):
    """Successful requests to the paths that are polled or probed."""

    def routine(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        if len(args) < 5:
            return False
        path, status = str(args[2]), args[4]
        return isinstance(status, int) and status < 400 and bool(ROUTINE_PATHS.match(path))


class RoutineTasks(_Demote):
    """The task runner's lines for each task queued, started and finished."""

    def routine(self, record: logging.LogRecord) -> bool:
        return bool(ROUTINE_TASK_LINES.search(record.getMessage()))
