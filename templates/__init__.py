"""Package templates that ``verihub init`` copies (one directory each). Data only, no code to import.

They live at the top of the repository; ``sdk/verihub/templates`` is a link here, which the SDK's builds
(wheel and sdist) resolve into files, so ``verihub.templates`` is the same in a checkout and an install."""
