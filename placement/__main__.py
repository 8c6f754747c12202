"""``python -m placement``: the same as ``phrame placement`` (the loop, or ``--once``)."""

from __future__ import annotations

import argparse
import sys

from phrame import cmd_placement


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m placement", description="Phrame placement reconciler")
    cmd_placement.configure(parser)
    return cmd_placement.run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
