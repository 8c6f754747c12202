"""topic_api/imports."""
