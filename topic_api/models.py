"""The shapes the topic API answers with, as TypedDicts: the source of ``/openapi.json``'s schemas.

:mod:`topic_api.openapi.document` publishes them (``json_schema``); the routes name them in
their ``@operation``. They describe what :mod:`topic_api.nodes`, :mod:`topic_api.drift`,
:mod:`topic_api.environments` and the routes return; schemathesis checks live answers
against them, so they must stay exact. No behaviour here.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired, TypedDict

from topic_api.openapi.json_schema import Doc, Min

Count = Annotated[int, Min(0)]


class Error(TypedDict):
    error: str


class Forwarded(TypedDict):
    """config-sync's own answer, passed through (docs/services/config-sync.md)."""

    status: str


class PlaneStamps(TypedDict):
    desired: float | None
    actual: float | None


class Host(TypedDict):
    cpu_percent: float | None
    load1: float | None
    mem_total: float | None
    mem_used: float | None
    disk_total: float | None
    disk_used: float | None


class HistoryEntry(TypedDict):
    ts: Annotated[float, Doc("the heartbeat's own ts (the node's clock)")]
    at: Annotated[float, Doc("when this API received it (its own clock)")]
    cpu_percent: float | None
    mem_used: float | None
    mem_total: float | None
    disk_used: float | None
    disk_total: float | None


class Generations(TypedDict):
    desired: int | None
    applied: int | None


class Commits(TypedDict):
    desired: str | None
    applied: str | None


class ItemCounts(TypedDict):
    containers: Count
    networks: Count
    processes: Count


class NodeSummary(TypedDict):
    node: str
    state: Literal["online", "offline", "unknown"]
    online: bool
    presence: Annotated[
        Literal["online", "disconnected", "offline", "unknown"],
        Doc(
            "state with offline split: disconnected (silent without a goodbye, within the longest "
            "disconnect grace of its environments: presumably still running) or offline"
        ),
    ]
    reason: Annotated[str, Doc("why the state (judge_node)")]
    heartbeat_age_s: float | None
    host: Host | None
    converged: bool | None
    generation: Generations
    commit: Commits
    drift: Annotated[int, Min(0), Doc("items not in-sync")]
    recent_exits: Annotated[
        int, Min(0), Doc("containers running again after an exit within PHRAME_API_RECENT_EXIT_S")
    ]
    errors: list[str]
    counts: ItemCounts
    history: list[HistoryEntry]


class Difference(TypedDict):
    field: str
    desired: Any | None
    actual: Any | None


class RecentExit(TypedDict):
    exit_code: Annotated[int | None, Doc("null: the agent did not see this exit")]
    finished_at: Annotated[str, Doc("Docker's FinishedAt (RFC 3339)")]
    age_s: Annotated[float, Min(0)]
    restarted_by: Annotated[str | None, Doc("agent, or null: not started by it")]


class Item(TypedDict):
    kind: Literal["containers", "networks", "processes"]
    id: str
    environment: str
    service: str | None
    status: Literal["in-sync", "drift", "missing", "extra", "failed", "pending"]
    desired: Any | None
    actual: Any | None
    differences: list[Difference]
    commit: Any | None
    health: Any | None
    recent_exit: Annotated[
        RecentExit | None,
        Doc("running again, but exited within PHRAME_API_RECENT_EXIT_S (status stays in-sync)"),
    ]


class NodeDetail(NodeSummary):
    items: list[Item]


class Nodes(TypedDict):
    generated_at: PlaneStamps
    nodes: list[NodeSummary]


class EnvError(TypedDict):
    """Published open: a sync error may carry more fields (``column``)."""

    file: Any | None
    line: Any | None
    rule: Any | None
    message: str


class Environment(TypedDict):
    environment: str
    sync: dict[str, Any] | None
    ok: bool | None
    commit: str | None
    errors: list[EnvError]
    placement: dict[str, Any] | None
    deploys: list[dict[str, Any]]
    rollouts: NotRequired[  # only when there is one
        Annotated[
            dict[str, dict[str, Any]],
            Doc("service -> its staged rollout (schemas/json/desired-rollout.schema.json)"),
        ]
    ]


class EnvironmentDetail(Environment):
    services: dict[str, Any]


class Environments(TypedDict):
    environments: list[Environment]


class Topics(TypedDict):
    filter: str
    count: Count
    topics: dict[str, Any]


class KvValue(TypedDict):
    topic: str
    payload: Any | None
    source: str


class KvWritten(TypedDict):
    topic: str
    retained: bool
    bytes: int


class KvDeleted(TypedDict):
    topic: str
    deleted: bool


class Restarted(TypedDict):
    topic: str
    id: Annotated[str, Doc("the command's id: the agent runs it once")]


class LogTail(TypedDict):
    node: str
    item: Annotated[str, Doc("the container's item id")]
    id: Annotated[str, Doc("the command's id")]
    at: Annotated[float, Doc("when the agent read the tail (unix seconds, the node's clock)")]
    lines: Annotated[list[str], Doc("the last lines of its output, oldest first; secret env values as ***")]
    truncated: Annotated[bool, Doc("older lines were left out")]


class StreamTicket(TypedDict):
    ticket: Annotated[str, Doc("send as /api/events?ticket=...: good for one stream, and nothing else")]
    expires_in_s: Annotated[int, Min(1), Doc("seconds it stays good unless used")]


class Snapshots(TypedDict):
    desired: bool
    actual: bool


class Health(TypedDict):
    status: str
    snapshots: Snapshots
    broker: bool
    streams: int


class Ready(TypedDict):
    status: Literal["ready"]
    broker: Annotated[bool, Doc("whether this API has a broker connection configured (writes)")]


class NotReady(TypedDict):
    error: Annotated[str, Doc("why not: the broker connection is down, with its last error")]
    broker: Literal[False]
