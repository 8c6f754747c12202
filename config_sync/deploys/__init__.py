"""config_sync/deploys."""
