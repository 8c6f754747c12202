"""``python -m config_sync``: run config-sync under uvicorn with settings from the environment."""

from __future__ import annotations

import sys

from config_sync.errors import SyncError
from config_sync.settings import SyncSettings


def main() -> int:
    import uvicorn

    from config_sync.app import create_app
    from config_sync.service import ConfigSync
    from phrame_settings import setup_logging

    setup_logging()
    try:
        settings = SyncSettings.from_env()
    except SyncError as e:
        print(f"config-sync: {e}", file=sys.stderr)
        return 2
    host, port = settings.listen_address
    uvicorn.run(create_app(ConfigSync(settings)), host=host, port=port, log_level="info")
    return 0


if __name__ == "__main__":
    sys.exit(main())
