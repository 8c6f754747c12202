"""config_sync/rollouts."""
