#!/bin/bash
# Partial credit: reward.json holds the share of words counted right (the "reward" key) and whether the
# file parsed at all.
python3 /tests/check_counts.py
