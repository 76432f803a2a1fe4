"""`python -m config.prepare`: everything ``make run`` does before it serves, in one process.

In order: write ``var/development.env`` unless it exists (``config.development``), then, on
that environment, ``migrate`` (with the system checks, once), ``collectstatic``, ``demo_setup
--quiet`` and ``demo_corpus``. Each step is idempotent, so a second ``make run`` finds nothing
to do; one process instead of five saves four starts of Python, Django and the settings
(a second each on a busy 2-core machine; issue 31, ``bench/startup.py``). The commands stay
what they were: each can still be run alone with ``manage.py``.

Exit status 0, or the failing command's status (1) with its message on stderr, as ``manage.py``
reports a ``CommandError``.
"""

from __future__ import annotations

import os
import sys

from config.development import load_development_env, write_development_env


def main() -> int:
    write_development_env()
    load_development_env()  # the same DEBUG and SECRET_KEY as the README's manage.py commands
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django  # after the environment: settings read it when Django is set up

    django.setup()
    from django.core.management import CommandError, call_command
    from django.core.management.base import SystemCheckError

    try:
        # call_command skips the system checks unless asked: migrate runs them, for all four.
        call_command("migrate", interactive=False, verbosity=0, skip_checks=False)
        call_command("collectstatic", interactive=False, verbosity=0)
        call_command("demo_setup", quiet=True)
        call_command("demo_corpus")
    except CommandError as exc:  # as manage.py reports one (BaseCommand.run_from_argv)
        print(str(exc) if isinstance(exc, SystemCheckError) else f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return exc.returncode
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
