"""``python -m config_sync [--listen HOST:PORT]``: the same as ``phrame config-sync``."""

from __future__ import annotations

import sys

from phrame.cli import main

if __name__ == "__main__":
    sys.exit(main(["config-sync", *sys.argv[1:]]))
