"""The dev stack (``phrame dev``): the whole loop on one machine, supervised in the foreground.

A broker, config-sync on a local bare repository (the ``local`` git host), placement and
node agents sharing this host's Docker daemon, started from a quickstart sample. It never
touches Docker objects other than its own nodes' labelled ones.
"""
