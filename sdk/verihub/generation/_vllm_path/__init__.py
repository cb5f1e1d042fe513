"""Modules the vLLM servers verihub starts import: this folder is put on their ``PYTHONPATH`` (alone, so that
nothing of verihub shadows a package of the server's interpreter)."""
