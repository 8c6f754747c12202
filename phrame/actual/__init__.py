"""One view of the actual plane: nodes' heartbeats, statuses and items, liveness by one rule.

Services feed :class:`ActualView` the actual plane's messages and read verdicts, statuses
and items from it; listeners are told of changes. It never subscribes or publishes itself.
"""

from phrame.actual.beats import HEARTBEAT_QOS, liveness_filters
from phrame.actual.records import Change, ItemReport, NodeFacts, Report, Trust
from phrame.actual.view import ActualView

__all__ = [
    "HEARTBEAT_QOS",
    "ActualView",
    "Change",
    "ItemReport",
    "NodeFacts",
    "Report",
    "Trust",
    "liveness_filters",
]
