"""The pip "simple" index: PEP 503 HTML pages (and the data for PEP 691 JSON), with sha256 hashes,
requires-python and core metadata (PEP 658/714) for every file."""

from __future__ import annotations

import hashlib
import html
import io
import zipfile
from dataclasses import dataclass
from email.parser import HeaderParser

__all__ = ["JSON_CONTENT_TYPE", "IndexFile", "index_file", "project_json", "project_page", "root_json", "root_page"]

JSON_CONTENT_TYPE = "application/vnd.pypi.simple.v1+json"


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str
    sha256: str
    requires_python: str | None
    metadata: bytes | None  # the wheel's METADATA, served beside it as FILENAME.metadata
    upload_time: str | None = None

    @property
    def metadata_sha256(self) -> str | None:
        return hashlib.sha256(self.metadata).hexdigest() if self.metadata is not None else None


def index_file(filename: str, content: bytes, url: str, upload_time: str | None = None,
               sha256: str | None = None) -> IndexFile:
    """An index entry; ``sha256`` is the hash recorded at upload (the content's own hash if not given)."""
    metadata = _wheel_metadata(content) if filename.endswith(".whl") else None
    requires = HeaderParser().parsestr(metadata.decode("utf-8", "replace")).get("Requires-Python") if metadata else None
    return IndexFile(filename, url, sha256 or hashlib.sha256(content).hexdigest(), requires, metadata, upload_time)


def _wheel_metadata(content: bytes) -> bytes | None:
    with zipfile.ZipFile(io.BytesIO(content)) as wheel:
        for name in wheel.namelist():
            if name.endswith(".dist-info/METADATA") and name.count("/") == 1:
                return wheel.read(name)
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
    return (f'<!DOCTYPE html>\n<html>\n  <head>\n    <meta name="pypi:repository-version" content="1.1">\n'
            f"    <title>{html.escape(title)}</title>\n  </head>\n  <body>\n    <h1>{html.escape(title)}</h1>\n"
            f"{body}\n  </body>\n</html>\n")
