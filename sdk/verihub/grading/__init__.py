"""Grading: the layered verifier (:mod:`.verifier`: rule -> check -> judge, gates, weights, time limits,
faults that are never zeros), what it returns (:mod:`.grade`), the judge layer (:mod:`.judge`), and the
workers that run checks off the event loop (``_pools``, ``_check_worker``).

Imports the spec, the checks, the sandbox and the generation backends (a judge's model); never an
environment, a session, or anything that serves, evaluates, publishes or trains.
"""
