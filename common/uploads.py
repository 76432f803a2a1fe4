"""Upload limits enforced while a multipart body is read, before any file is kept.

Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (``QUARRY_MAX_REQUEST_BYTES``) leaves file data out,
so without this an upload of any size was received, stored and only then failed. The ASGI
edge (``config.asgi``) already refuses a body over the request limit as it arrives; this
handler, first in ``FILE_UPLOAD_HANDLERS``, refuses the same request from its declared length,
and stops a file the moment its bytes pass ``QUARRY_UPLOAD_MAX_BYTES``: the parse fails with
``UploadTooLarge`` (413, naming the file), and nothing of the request is stored.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.files.uploadhandler import FileUploadHandler


def describe_bytes(n: int) -> str:
    """``50 MB``, ``1.5 MB``, ``2,048 bytes`` (MB = 2**20 bytes), as knowledge.rag.limits writes them."""
    mb = 1024 * 1024
    if n >= mb:
        return f"{n / mb:.0f} MB" if n % mb == 0 else f"{n / mb:.1f} MB"
    return f"{n:,} bytes"


class UploadTooLarge(RequestDataTooBig):
    """A request or a file over its limit. ``field`` names the form field; ``message`` says which limit."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def request_too_large_message(limit: int) -> str:
    return f"The request is larger than the limit of {describe_bytes(limit)} (QUARRY_MAX_REQUEST_BYTES)."


class LimitedUploadHandler(FileUploadHandler):
    """Passes every chunk on to the next handler, counting; raises ``UploadTooLarge`` past a limit."""

    def handle_raw_input(self, input_data: Any, META: Any, content_length: int, boundary: Any, encoding: Any = None) -> None:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if limit is not None and content_length > limit:
            raise UploadTooLarge("files", request_too_large_message(limit))
        return None

    def new_file(self, field_name: str, file_name: str, *args: Any, **kwargs: Any) -> None:
        super().new_file(field_name, file_name, *args, **kwargs)
        self.file_bytes = 0

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        self.file_bytes += len(raw_data)
        limit = settings.QUARRY_UPLOAD_MAX_BYTES
        if self.file_bytes > limit:
            raise UploadTooLarge(self.field_name or "files", (
                f"{self.file_name} is over the upload limit of {describe_bytes(limit)} (QUARRY_UPLOAD_MAX_BYTES); "
                "nothing was uploaded."
            ))
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None  # the next handler builds the file
