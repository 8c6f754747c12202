"""Protected environments and deploy freezes: a hold between a rendering and its publication.

``protection`` decides, purely, whether a commit is held for an environment (which
protection judges it, who approved, whether a freeze is in force); ``store`` keeps the
approvals retained at ``<prefix>/desired/environments/<env>/approvals``; ``hold`` puts the
published state back for a held environment; ``controller`` wires them into config-sync
(the gate of each publication, the approve route, the wake-up at a freeze's end, GitLab's
merge-request approvals).
"""
