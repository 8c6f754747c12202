"""The placement decision, pure: inventory and liveness in, ``node.json`` and its moves out.

``placement`` runs it and commits the result; ``config_sync`` runs it on a merge request's
tree to preview where new or moved label-placed replicas would go (:mod:`phrame.placement_rules.preview`).
It never reads the clock, git or MQTT.
"""
