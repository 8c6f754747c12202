"""node_agent: see DESIGN.md; built by its own issue."""
