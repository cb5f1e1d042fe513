#!/bin/bash
# Runs from the working directory (/app); the reward goes to /logs/verifier/reward.txt.
if [ -f /app/hello.txt ] && [ "$(cat /app/hello.txt)" = "Hello, world!" ] && [ "$(wc -l < /app/hello.txt)" -eq 1 ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
