"""The version of mcptasks (kept equal to `[project] version` in pyproject.toml; a test checks it)."""

__version__ = "0.4.0"
