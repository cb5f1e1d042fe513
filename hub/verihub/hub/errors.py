"""The hub's errors and their machine-readable codes, defined once for the server and the client.

The server answers every refusal with the error's HTTP status, an ``X-Error-Code`` header and a JSON
body ``{"error": message, "code": code}``; the client turns a response back into the same exception with
:func:`error_from_response`. The first three codes are the Hugging Face Hub's own, so the unmodified
``huggingface_hub`` client raises its ``RepositoryNotFoundError`` & co. for them.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar

from verihub.errors import VerihubError

__all__ = [
    "ArchiveTooLargeError",
    "BodyTooLargeError",
    "CommitConflictError",
    "CorruptFileError",
    "EntryNotFoundError",
    "ErrorCode",
    "FileConflictError",
    "ForbiddenError",
    "HubError",
    "InvalidPathError",
    "InvalidRefNameError",
    "InvalidReleaseError",
    "InvalidRequestError",
    "MovedTagError",
    "NameTakenError",
    "NotFoundError",
    "PrivacyMismatchError",
    "RefExistsError",
    "RepoExistsError",
    "RepoNotFoundError",
    "RevisionNotFoundError",
    "TagExistsError",
    "UnauthorizedError",
    "UnsafeArchiveError",
    "VersionExistsError",
    "VersionNotFoundError",
    "error_for_code",
    "error_from_response",
]


class ErrorCode(StrEnum):
    REPO_NOT_FOUND = "RepoNotFound"
    REVISION_NOT_FOUND = "RevisionNotFound"
    ENTRY_NOT_FOUND = "EntryNotFound"
    NOT_FOUND = "NotFound"
    METHOD_NOT_ALLOWED = "MethodNotAllowed"
    INVALID_REQUEST = "InvalidRequest"
    INVALID_PATH = "InvalidPath"
    INVALID_REF_NAME = "InvalidRefName"
    INVALID_RELEASE = "InvalidRelease"
    UNSAFE_ARCHIVE = "UnsafeArchiveMember"
    ARCHIVE_TOO_LARGE = "ArchiveTooLarge"
    BODY_TOO_LARGE = "BodyTooLarge"
    UNAUTHORIZED = "Unauthorized"
    FORBIDDEN = "Forbidden"
    REPO_EXISTS = "RepoExists"
    REF_EXISTS = "RefExists"
    TAG_EXISTS = "TagExists"
    COMMIT_CONFLICT = "CommitConflict"
    VERSION_EXISTS = "VersionExists"
    VERSION_NOT_FOUND = "VersionNotFound"
    NAME_TAKEN = "DistributionNameTaken"
    FILE_CONFLICT = "PublishedFileConflict"
    PRIVACY_MISMATCH = "PrivacyMismatch"
    CORRUPT_FILE = "CorruptFile"
    MOVED_TAG = "MovedTag"
    INTERNAL = "InternalError"


class HubError(VerihubError):
    """A hub refusal: ``code`` and ``status`` travel over HTTP; ``commit`` names the commit it concerns."""

    code: ClassVar[ErrorCode] = ErrorCode.INTERNAL
    status: ClassVar[int] = 500

    def __init__(self, message: str, *, commit: str | None = None) -> None:
        super().__init__(message)
        self.commit = commit


class InvalidRequestError(HubError, ValueError):
    """Malformed input: JSON, an NDJSON commit line, a query parameter, a name."""

    code, status = ErrorCode.INVALID_REQUEST, 400


class InvalidPathError(InvalidRequestError):
    """A file path that is absolute, climbs out with '..', or is otherwise not a plain relative path."""

    code = ErrorCode.INVALID_PATH


class InvalidRefNameError(InvalidRequestError):
    """A branch or tag name git refuses, or a branch that would take a release tag's name (``v1.0.0``)."""

    code = ErrorCode.INVALID_REF_NAME


class InvalidReleaseError(InvalidRequestError):
    """A release's files are refused: another project's name, or an archive with paths leaving it."""

    code = ErrorCode.INVALID_RELEASE


class UnsafeArchiveError(InvalidReleaseError):
    """A release archive's member is not a regular file, a directory or a link inside it (the message names
    the archive and the member)."""

    code = ErrorCode.UNSAFE_ARCHIVE


class ArchiveTooLargeError(InvalidReleaseError):
    """A release archive unpacks past :data:`~verihub.hub.limits.MAX_ARCHIVE_BYTES` or holds more than
    :data:`~verihub.hub.limits.MAX_ARCHIVE_MEMBERS` members."""

    code = ErrorCode.ARCHIVE_TOO_LARGE


class BodyTooLargeError(HubError, ValueError):
    code, status = ErrorCode.BODY_TOO_LARGE, 413


class UnauthorizedError(HubError, PermissionError):
    code, status = ErrorCode.UNAUTHORIZED, 401


class ForbiddenError(HubError, PermissionError):
    code, status = ErrorCode.FORBIDDEN, 403


class NotFoundError(HubError, LookupError):
    code, status = ErrorCode.NOT_FOUND, 404


class RepoNotFoundError(NotFoundError):
    code = ErrorCode.REPO_NOT_FOUND


class RevisionNotFoundError(NotFoundError):
    code = ErrorCode.REVISION_NOT_FOUND


class EntryNotFoundError(NotFoundError, FileNotFoundError):
    code = ErrorCode.ENTRY_NOT_FOUND


class VersionNotFoundError(NotFoundError):
    """No published version satisfies a requirement; the message names the versions that exist."""

    code = ErrorCode.VERSION_NOT_FOUND


class RepoExistsError(HubError, FileExistsError):
    code, status = ErrorCode.REPO_EXISTS, 409


class RefExistsError(HubError, ValueError):
    """A branch or tag of that name exists already."""

    code, status = ErrorCode.REF_EXISTS, 409


class TagExistsError(RefExistsError):
    """A tag (a published version) already points elsewhere; tags never move."""

    code = ErrorCode.TAG_EXISTS


class CommitConflictError(HubError, ValueError):
    """A commit made on top of ``parentCommit`` found its branch moved on: another commit came first."""

    code, status = ErrorCode.COMMIT_CONFLICT, 412


class VersionExistsError(HubError, ValueError):
    """A published version is immutable; the message says to bump."""

    code, status = ErrorCode.VERSION_EXISTS, 409


class NameTakenError(HubError, ValueError):
    """Another repository already publishes under this distribution name."""

    code, status = ErrorCode.NAME_TAKEN, 409


class FileConflictError(HubError, ValueError):
    """A published file of this name exists with other bytes: published files are written once."""

    code, status = ErrorCode.FILE_CONFLICT, 409


class PrivacyMismatchError(HubError, ValueError):
    """``push --private`` to a repository that exists and is public."""

    code, status = ErrorCode.PRIVACY_MISMATCH, 409


class CorruptFileError(HubError, RuntimeError):
    """A stored file's bytes no longer match the hash recorded at publish: the server's fault, never served."""

    code, status = ErrorCode.CORRUPT_FILE, 500


class MovedTagError(HubError, RuntimeError):
    """A release tag points elsewhere than when the release was installed (a hub that lets tags move): refused
    unless ``--allow-moved-tag``. Raised by the client only."""

    code, status = ErrorCode.MOVED_TAG, 409


def _subclasses(cls: type[HubError]) -> list[type[HubError]]:
    return [cls] + [each for sub in cls.__subclasses__() for each in _subclasses(sub)]


_BY_CODE: dict[str, type[HubError]] = {cls.code.value: cls for cls in reversed(_subclasses(HubError))}


def error_for_code(code: str | None, status: int, message: str, *, commit: str | None = None) -> HubError:
    """The exception a server meant by ``code`` (a generic :class:`HubError` for codes this client lacks)."""
    cls = _BY_CODE.get(code or "")
    if cls is None or cls is HubError:
        error = HubError(f"hub error {status}: {message}", commit=commit)
        error.status = status  # type: ignore[misc]  # the status a plain HubError carries
        return error
    return cls(message, commit=commit)


def error_from_response(response: Any) -> HubError:
    """The exception for an HTTP error response of a verihub hub (an httpx-like response object)."""
    message = ""
    try:
        body = response.json()
        message = str(body.get("error", "")) if isinstance(body, dict) else ""
    except ValueError:
        pass
    message = message or response.headers.get("X-Error-Message") or f"HTTP {response.status_code}"
    return error_for_code(
        response.headers.get("X-Error-Code"),
        response.status_code,
        message,
        commit=response.headers.get("X-Repo-Commit"),
    )
