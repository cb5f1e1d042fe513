import sys

# Passes (exit 0) only when the answer's script printed 42.
with open(sys.argv[1]) as handle:
    said = handle.read().strip()
sys.exit(0 if said == "42" else 1)
