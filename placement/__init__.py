"""placement: see DESIGN.md; built by its own issue."""
