"""The runtime every controller runs on: one keyed work queue, one retry vocabulary.

Events only add keys to a :class:`WorkQueue`; a :class:`Runner` calls the controller's
``sync(key)``, which raises :class:`TemporaryError` (retried with :func:`backoff`) or
:class:`PermanentError` (recorded, left until new input). Work that is no key (a periodic
check, an outbox) runs on a :class:`BackgroundLoop`. Imports no service and no SDK.
"""

from __future__ import annotations

from phrame.runtime.loop import BackgroundLoop
from phrame.runtime.queue import SIGNAL_CHECK_S, Clock, WorkQueue
from phrame.runtime.retry import Backoff, PermanentError, TemporaryError, backoff, is_temporary
from phrame.runtime.runner import Runner

__all__ = [
    "SIGNAL_CHECK_S",
    "BackgroundLoop",
    "Backoff",
    "Clock",
    "PermanentError",
    "Runner",
    "TemporaryError",
    "WorkQueue",
    "backoff",
    "is_temporary",
]
