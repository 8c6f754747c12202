"""Publication: a rendering turned into the retained desired plane.

``plane`` is the pure view (what a rendering makes of the published topics, and the diff),
``order`` decides what is published and cleared and in which order (items before manifests),
``sender`` sends it and waits for the broker's acknowledgements. Unchanged items are never
republished.
"""
