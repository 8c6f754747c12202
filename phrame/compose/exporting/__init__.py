"""One node's desired state → a docker-compose.yml (``node_file.export_node``).

``fields`` maps one desired container or network to its compose entry.
"""
