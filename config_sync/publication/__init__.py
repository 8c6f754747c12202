"""config_sync/publication."""
