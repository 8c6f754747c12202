"""config_sync: see DESIGN.md; built by its own issue."""
