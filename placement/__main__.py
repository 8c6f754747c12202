"""``python -m placement [--once]``: the same as ``phrame placement``."""

from __future__ import annotations

import sys

from phrame.cli import main

if __name__ == "__main__":
    sys.exit(main(["placement", *sys.argv[1:]]))
