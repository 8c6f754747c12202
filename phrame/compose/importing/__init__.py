"""A compose file → phrame-config files (``compose_file.import_compose``).

One module per concern of a compose service: ``service`` (the whole entry), ``values``
(notations), ``text`` (interpolation, environment, labels), ``deploy``, ``top`` (top-level
networks and volumes), ``keys`` (what is left out and why), ``shapes`` (types compose requires).
"""
