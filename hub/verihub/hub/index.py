"""The pip "simple" index: PEP 503 HTML pages (and the data for PEP 691 JSON), with sha256 hashes,
requires-python and core metadata (PEP 658/714) for every file. What a file's entry says is computed once,
when it is published (:func:`describe`), never per request."""

from __future__ import annotations

import hashlib
import html
import io
import zipfile
from dataclasses import dataclass
from email.parser import HeaderParser

__all__ = ["JSON_CONTENT_TYPE", "IndexFile", "describe", "project_json", "project_page", "root_json", "root_page"]

JSON_CONTENT_TYPE = "application/vnd.pypi.simple.v1+json"
_MAX_METADATA = 1 << 20


@dataclass(frozen=True)
class IndexFile:
    """One file's entry in a project's index, as recorded when it was published."""

    filename: str
    version: str
    sha256: str
    requires_python: str | None
    metadata_sha256: str | None  # the wheel's METADATA, served beside it as FILENAME.metadata
    upload_time: str
    url: str = ""


def describe(filename: str, version: str, content: bytes, upload_time: str) -> tuple[IndexFile, bytes | None]:
    """A file's index entry and its core metadata (wheels only), computed from its bytes."""
    metadata = _wheel_metadata(content) if filename.endswith(".whl") else None
    requires = HeaderParser().parsestr(metadata.decode("utf-8", "replace")).get("Requires-Python") if metadata else None
    metadata_sha = hashlib.sha256(metadata).hexdigest() if metadata is not None else None
    return IndexFile(
        filename, version, hashlib.sha256(content).hexdigest(), requires, metadata_sha, upload_time
    ), metadata


def _wheel_metadata(content: bytes) -> bytes | None:
    try:
        with zipfile.ZipFile(io.BytesIO(content)) as wheel:
            for name in wheel.namelist():
                if name.endswith(".dist-info/METADATA") and name.count("/") == 1:
                    return wheel.read(name) if wheel.getinfo(name).file_size <= _MAX_METADATA else None
    except (zipfile.BadZipFile, OSError):
        return None
    return None


def project_page(project: str, files: list[IndexFile]) -> str:
    links = []
    for file in files:
        attributes = f'href="{html.escape(file.url)}#sha256={file.sha256}"'
        if file.requires_python:
            attributes += f' data-requires-python="{html.escape(file.requires_python)}"'
        if file.metadata_sha256:
            attributes += f' data-dist-info-metadata="sha256={file.metadata_sha256}"'
            attributes += f' data-core-metadata="sha256={file.metadata_sha256}"'
        links.append(f"    <a {attributes}>{html.escape(file.filename)}</a><br/>")
    return _page(f"Links for {project}", "\n".join(links))


def root_page(projects: list[str]) -> str:
    links = "\n".join(f'    <a href="{html.escape(name)}/">{html.escape(name)}</a><br/>' for name in sorted(projects))
    return _page("Simple index", links)


def project_json(project: str, files: list[IndexFile], versions: list[str]) -> dict[str, object]:
    """PEP 691 JSON (API 1.1: versions and upload-time as in PEP 700)."""
    entries = []
    for file in files:
        entry: dict[str, object] = {"filename": file.filename, "url": file.url, "hashes": {"sha256": file.sha256}}
        if file.requires_python:
            entry["requires-python"] = file.requires_python
        if file.metadata_sha256:
            entry["core-metadata"] = {"sha256": file.metadata_sha256}
            entry["dist-info-metadata"] = {"sha256": file.metadata_sha256}
        if file.upload_time:
            entry["upload-time"] = file.upload_time
        entries.append(entry)
    return {"meta": {"api-version": "1.1"}, "name": project, "versions": versions, "files": entries}


def root_json(projects: list[str]) -> dict[str, object]:
    return {"meta": {"api-version": "1.1"}, "projects": [{"name": name} for name in sorted(projects)]}


def _page(title: str, body: str) -> str:
    return (
        f'<!DOCTYPE html>\n<html>\n  <head>\n    <meta name="pypi:repository-version" content="1.1">\n'
        f"    <title>{html.escape(title)}</title>\n  </head>\n  <body>\n    <h1>{html.escape(title)}</h1>\n"
        f"{body}\n  </body>\n</html>\n"
    )
