import json

# The expected counts live here, out of the agent's reach (it never sees /tests), not in the story it could edit.
EXPECTED = {"the": 3, "quick": 1, "brown": 1, "fox": 1, "jumps": 1, "over": 1, "lazy": 1, "dog": 1, "end": 1}
try:
    with open("/app/counts.json") as handle:
        counts = json.load(handle)
    parsed = 1.0 if isinstance(counts, dict) else 0.0
except (OSError, ValueError):
    counts, parsed = {}, 0.0
right = sum(1 for word, count in EXPECTED.items() if isinstance(counts, dict) and counts.get(word) == count)
print(json.dumps({"reward": right / len(EXPECTED), "parsed": parsed}))
