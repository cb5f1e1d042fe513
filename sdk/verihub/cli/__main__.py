"""``python -m verihub.cli``: the ``verihub`` command under a chosen interpreter."""

from verihub.cli import main

main()
