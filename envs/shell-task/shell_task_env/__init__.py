"""Environment package: the spec, card and data ship beside this file; the state check is in ``checks``."""
