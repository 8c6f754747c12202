"""Docker names of managed containers, and the advice when a name is held by another node.

Pure; the planner calls it. A container is named ``<env>.<service>.<replica>``; with
``PHRAME_SHARED_DAEMON=true`` (several nodes' agents on one daemon: the dev stack, tests)
it is ``<env>.<service>.<replica>.<node>``, so a replica moved off a dead node can start on
its new node while the dead node's container still exists. Item ids on the MQTT planes
never change; a container is always identified by its labels, never by parsing its name.
"""

from __future__ import annotations

from node_agent.models import ObservedContainer

SHARED_DAEMON_SETTING = "PHRAME_SHARED_DAEMON"


def container_name(item_id: str, node: str, *, shared_daemon: bool) -> str:
    """Item ids have no dots beyond their two separators and nodes none at all, so the
    shared form is unambiguous (and Docker accepts dots in names)."""
    return f"{item_id}.{node}" if shared_daemon else item_id


def is_phrame_name(c: ObservedContainer, node: str) -> bool:
    """True when ``c``'s name is one phrame gives its item (in either mode), so a container
    labelled by hand with a made-up name is never taken for an item."""
    item = c.item_id
    return item is not None and c.name in (item, f"{item}.{node}")


def name_held(item_id: str, name: str, holder: str, *, shared_daemon: bool) -> str:
    """The error for a desired container whose Docker name another node's container holds:
    the placement is right; the holder's agent (or a person) must remove its container."""
    text = (
        f"container {item_id}: the name {name} is held by node {holder}'s container; not "
        f"touched: node {holder}'s agent must remove it (it does once {item_id} is no longer "
        f"desired there), or a person (docker rm -f {name})"
    )
    if not shared_daemon:
        text += (
            f"; when several nodes' agents share one Docker daemon, {SHARED_DAEMON_SETTING}=true "
            "on each gives every node its own container names"
        )
    return text
