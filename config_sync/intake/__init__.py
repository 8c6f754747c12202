"""config_sync/intake."""
