"""The topic API (``phrame topic-api``): REST, OpenAPI and server-sent events over the mirrors'
snapshot files, and the web dashboard's server.

Reads ``<PHRAME_MIRROR_DIR>/{desired,actual}.json`` (never one broker subscription per
browser) and publishes writes (kv, restart) over one MQTT connection.
"""
