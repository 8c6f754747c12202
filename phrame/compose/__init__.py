"""Docker Compose import and export (docs/services/compose.md): pure functions, no broker, no Docker.

``export_node`` turns one node's desired-plane payloads into a docker-compose.yml;
``import_compose`` turns a compose file into phrame-config files. Called by the
``phrame import-compose`` / ``export-compose`` commands and the topic API. It must never
read the importer's environment, a secret's value, or write files itself.
"""

from __future__ import annotations

from phrame.compose.exporting.node_file import export_node
from phrame.compose.importing.compose_file import import_compose
from phrame.compose.models import ComposeError, Dangerous, ImportResult, Unsupported

__all__ = ["ComposeError", "Dangerous", "ImportResult", "Unsupported", "export_node", "import_compose"]
