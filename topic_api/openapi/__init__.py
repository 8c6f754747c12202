"""The OpenAPI 3.0 document of the topic API (``/openapi.json``).

``document`` assembles it; ``parts`` holds the shared building blocks, ``shapes`` the response
schemas and ``compose`` the compose routes' operations.
"""
