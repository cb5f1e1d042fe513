"""Environment package: the spec and card ship beside this file; tasks come from :mod:`.gen`."""
