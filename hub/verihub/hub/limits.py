"""Every size limit of the hub, in one place (a hub operator's reference; docs/hub.md points here).

Request bodies are read only after authorization and only up to these sizes (a 413 past them); a release's
wheel and sdist are read member by member, and refused (a 400, ``ArchiveTooLarge``) once they unpack past
``MAX_ARCHIVE_BYTES`` or hold more than ``MAX_ARCHIVE_MEMBERS`` members: the check stops reading there, so a
gzip bomb costs at most the cap.
"""

from __future__ import annotations

__all__ = ["MAX_ARCHIVE_BYTES", "MAX_ARCHIVE_MEMBERS", "MAX_COMMIT_BYTES", "MAX_JSON_BYTES"]

MAX_JSON_BYTES = 1 << 20
"""A JSON request body."""
MAX_COMMIT_BYTES = 512 << 20
"""A commit's NDJSON body (files base64-encoded)."""
MAX_ARCHIVE_BYTES = 256 << 20
"""What one release archive unpacks to (as much as a package the hub builds may hold)."""
MAX_ARCHIVE_MEMBERS = 100_000
"""Members of one release archive (as many files as one commit may add)."""
