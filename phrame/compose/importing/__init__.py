"""phrame/compose/importing."""
