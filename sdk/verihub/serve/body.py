"""Request bodies as verihub's servers read them (``verihub serve`` and the hub server): never past a
limit, and a validation error told in one line that names the fields."""

from __future__ import annotations

from pydantic import ValidationError
from starlette.requests import Request

from verihub.errors import BodyTooLarge

__all__ = ["BodyTooLarge", "describe", "read_body"]


async def read_body(request: Request, limit: int) -> bytes:
    """At most ``limit`` bytes of body: a larger ``Content-Length`` is refused before a byte is read."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(f"the request body may be at most {limit} bytes (it says {declared})")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(f"the request body may be at most {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def describe(error: ValidationError) -> str:
    """The first few problems of ``error``, each as ``field.path: message``."""
    problems = []
    for problem in error.errors()[:5]:
        where = ".".join(str(part) for part in problem["loc"]) or "body"
        problems.append(f"{where}: {problem['msg']}")
    return "; ".join(problems)
