"""Notifications: one message per transition of an environment's health (while a deployment
runs and after it ended), best effort.

``events`` the value types, ``targets`` reads ``notify:`` from ``environment.yaml``,
``decide`` the pure choice of what to send, ``payloads`` the pure bodies (Slack, JSON),
``delivery`` the HTTP adapter (reads the URL file, POSTs), ``outbox`` the bounded queue and
its retrying thread, ``notifier`` the one entry point the service calls. Nothing here may
block or fail a deployment.
"""
