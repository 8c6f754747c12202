"""The one exception of the dev stack: a problem the user must fix, said in one line."""

from __future__ import annotations


class DevError(Exception):
    """Bad options, a taken port, a stack already running: ``phrame dev`` exits 2 with it."""
