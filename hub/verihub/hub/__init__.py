"""The verihub hub: storage, an HTTP server speaking the Hugging Face Hub API plus a pip index, and a client.

``open_hub(location)`` gives the hub a command talks to: a :class:`~verihub.hub.remote.RemoteHub` for an
http(s) URL, else a :class:`~verihub.hub.local.LocalHub` directory (default ``$VERIHUB_HOME/hub``).
Importing this package is cheap; the backends load on use. The hub is a distribution of its own
(verihub-hub) on the SDK: it imports the SDK, never the trainers, and the SDK never imports it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["open_hub"]


def open_hub(location: str | None = None, token: str | None = None) -> Any:
    """The hub at ``location`` (default ``$VERIHUB_HUB``, else the embedded one): a server URL or a directory."""
    from verihub import settings

    location = settings.hub_location(location)
    if location and location.startswith(("http://", "https://")):
        from verihub.hub.remote import RemoteHub

        return RemoteHub(location, settings.hub_token(token))
    from verihub.hub.local import LocalHub

    return LocalHub(location)
