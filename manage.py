#!/usr/bin/env python3
"""Django's command-line utility for Quarry."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    # After `make run`, the README's commands run in development mode without typing DEBUG=1
    # (config/development.py); an explicit DEBUG or SECRET_KEY always wins.
    from config.development import load_development_env

    load_development_env()
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
