"""The log a running server writes: each event once, in the one format (config/settings.py LOGGING).

The server runs as ``make run`` runs it (DEBUG on, uvicorn's CLI configuring its loggers before
Django configures ours), and the test reads what the process wrote to its stderr.
"""

from __future__ import annotations

import re

import httpx
import pytest

from tests.servers import asgi_server, child_env, read_log, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_warning_and_an_access_line_are_each_logged_once(tmp_path) -> None:  # type: ignore[no-untyped-def]
    env = child_env(DEBUG="1", QUARRY_DATA_DIR=str(tmp_path), QUARRY_LOG_LEVEL="INFO")
    with asgi_server(env, log_name="uvicorn-logging") as base:
        assert httpx.get(f"{base}/no-such-page-for-the-log-test").status_code == 404
        assert httpx.get(f"{base}/healthz").status_code == 200
        # The access line is written after the response is sent: wait for it, then for nothing more.
        wait_for(lambda: '"GET /no-such-page-for-the-log-test HTTP/1.1" 404' in read_log("uvicorn-logging"),
                 timeout=30, what="the access line of the 404")
    lines = read_log("uvicorn-logging").splitlines()
    warnings = [line for line in lines if "Not Found: /no-such-page-for-the-log-test" in line]
    assert len(warnings) == 1, warnings
    assert re.match(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ WARNING django\.request: Not Found: ", warnings[0]), warnings
    access = [line for line in lines if '"GET /no-such-page-for-the-log-test HTTP/1.1" 404' in line]
    assert len(access) == 1, access
    # A health probe is routine: demoted to DEBUG, so not in an INFO log.
    assert not [line for line in lines if "GET /healthz" in line]
