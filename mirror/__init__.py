"""The mirror: one plane's retained topics as one JSON snapshot file on disk.

``phrame mirror --plane desired|actual`` runs :class:`mirror.loop.MirrorLoop`; readers (the
topic API, a person with ``jq``) read ``<PHRAME_MIRROR_DIR>/<plane>.json`` instead of each
holding a broker subscription. It never publishes and never writes outside its folder.
"""

from __future__ import annotations
