"""Staged rollouts: a second controller between a rendering and its publication.

``waves`` plans which replicas get the new spec now (pure), ``gate`` holds back what a wave
has not reached, ``controller`` re-evaluates, promotes and rolls back, ``models`` holds the
values; what the nodes report of their containers comes from the one actual view
(:mod:`phrame.actual`).
"""
