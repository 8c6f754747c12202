"""topic_api/openapi."""
