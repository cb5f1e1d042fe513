#!/bin/bash
# Partial credit: reward.json holds the share of words counted right (the "reward" key) and whether the
# file parsed at all. The check prints it; this shell writes it (the reward is the tests' shell's to write).
# The check runs by name from the working directory (/app), where Harbor starts this script: the Python it
# starts there must import nothing the answer left in /app (a json module of its own, say).
PYTHONPATH=/tests python3 -m check_counts > /logs/verifier/reward.json
