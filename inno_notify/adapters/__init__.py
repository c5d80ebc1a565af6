"""One package per outside system. Adapters never import each other (import-linter enforces it)."""
