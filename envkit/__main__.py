"""``python -m envkit``."""

from __future__ import annotations

from envkit.cli import main

if __name__ == "__main__":
    main()
