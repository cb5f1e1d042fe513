"""Package templates that ``verihub init`` copies (one directory each). Data only, no code to import."""
