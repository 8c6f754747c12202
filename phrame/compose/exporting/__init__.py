"""phrame/compose/exporting."""
