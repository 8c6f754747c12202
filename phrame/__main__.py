"""``python -m phrame``: the same as the ``phrame`` console command (``phrame.cli.main``)."""

from __future__ import annotations

import sys

from phrame.cli import main

sys.exit(main())
