"""The placement reconciler (docs/services/placement.md): chooses nodes for label-placed services and
commits ``environments/<env>/node.json`` to a branch, never to a tag.

``decide`` is the pure decision; ``git_repo`` and ``phrame.gitlab`` are the adapters;
``reconcile`` runs one pass per environment; ``loop`` wires MQTT, the lock and the timer.
"""
