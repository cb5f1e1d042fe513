"""The verihub hub: storage, an HTTP server speaking the Hugging Face Hub API plus a pip index, and a client.

Not built yet; see the hub issue. Importing it is safe and cheap.
"""

__all__: list[str] = []
