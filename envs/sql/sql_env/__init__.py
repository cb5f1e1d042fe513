"""Environment package: the spec, card and data ship beside this file; the check is :mod:`.checks`."""
