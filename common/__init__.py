"""Helpers every app may import: they import no app of Quarry's (the layering test holds them to that).

``config`` is the composition root (settings, URLs, ASGI) and imports every app; what the apps
share lives here instead, so that no import runs back up into the wiring.
"""
