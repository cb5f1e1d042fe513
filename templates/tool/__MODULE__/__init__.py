"""The __ENV_NAME__ environment package; its spec, card and data ship beside this file."""
