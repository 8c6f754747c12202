"""Intake: what starts a sync and the sync pass itself.

GitLab webhooks (``webhooks``) and the poll only enqueue a key on the keyed work queue
(``queue``); one pass per key (``syncing``) fetches the head of the ref into the clone cache
(``clone``), validates, renders and hands the result to publication. Nothing here publishes a
commit that failed validation.
"""
