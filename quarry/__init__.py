"""Quarry from a plain Python script: ``import quarry; quarry.setup()``, then any of its modules.

The typed RAG API (``knowledge.rag``) and the services are Django code: they need the settings
and the app registry that ``manage.py`` sets up for its commands. ``setup()`` does the same
for a script run as ``.venv/bin/python script.py``: the settings module (``config.settings``
unless ``DJANGO_SETTINGS_MODULE`` names another), the development environment ``make run``
wrote (``var/development.env``, read only when neither ``DEBUG`` nor ``SECRET_KEY`` is set,
exactly as for ``manage.py``), then ``django.setup()``.

A script outside the checkout's root must put the checkout on ``sys.path`` first (Python
puts the script's own folder there, not the working directory); ``examples/rag_api.py``
shows how.
"""

from __future__ import annotations

import os

__all__ = ["setup"]


def setup() -> None:
    """Configure Django for Quarry in this process; calling it again does nothing.

    Raises what Django raises for a broken configuration (``ImproperlyConfigured`` naming the
    variable); the database is only reached by the first query.
    """
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    # Deferred: importing Django's app machinery before the settings module is chosen would fix the wrong one.
    from django.apps import apps

    if apps.ready:
        return
    from config.development import load_development_env

    load_development_env()
    import django

    django.setup()
