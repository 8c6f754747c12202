"""``python -m node_agent [--once ...]``: the same as ``phrame node-agent``."""

from __future__ import annotations

import sys

from phrame.cli import main

if __name__ == "__main__":
    sys.exit(main(["node-agent", *sys.argv[1:]]))
