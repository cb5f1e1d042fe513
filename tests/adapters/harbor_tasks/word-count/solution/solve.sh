#!/bin/bash
python3 - <<'PY'
import collections, json
words = open("/app/data/story.txt").read().split()
json.dump(collections.Counter(words), open("/app/counts.json", "w"))
PY
