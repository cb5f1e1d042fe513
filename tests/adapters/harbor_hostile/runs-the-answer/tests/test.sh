#!/bin/bash
# Runs the answer's own script, in the same jail as these tests, then writes the reward.
said=$(timeout 3 bash /app/answer.sh 2>/dev/null)
if [ "$said" = "42" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
