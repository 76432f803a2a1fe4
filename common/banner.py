"""What ``make run`` prints once the server answers (``config.serve``; ``manage.py demo_setup`` alone prints it too)."""

from __future__ import annotations


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
