#!/bin/bash
# Runs the answer's script, checks what it printed with a program of these tests, and writes the reward only
# when the check passes: a failing check ends the tests early (set -e), with no reward written.
set -e
timeout 3 bash /app/answer.sh > /tmp/said.txt 2>/dev/null || true
python3 /tests/check_said.py /tmp/said.txt
echo 1 > /logs/verifier/reward.txt
