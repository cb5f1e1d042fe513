"""The report environment package: its spec, card, rubric, calibration set and data ship beside this file.

:mod:`report_env.checks` holds the two checks the spec names: ``constraints`` (each task's length and form)
and ``key_facts`` (how many of the task's key facts the answer states).
"""
