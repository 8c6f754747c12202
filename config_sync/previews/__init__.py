"""Merge-request preview environments: ``<env>-mr-<iid>`` rendered from the merge request's
head, published beside the environment's own items, stopped on close, merge or staleness
(docs/services/config-sync.md#previews)."""
