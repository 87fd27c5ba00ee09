"""The cluster admin's middleware: the shared one (``rest/middleware.py``) with the
statuses of the broker's and the store's own errors, and the admin metrics.

=========================================  ======  =========================================
raised                                     status  note
=========================================  ======  =========================================
``AdminError`` subclasses                  its own 400/404/409/503 (a ``RestError``)
``InvalidTopicName`` (domain/topic_name.py)       400
broker ``TopicNotFound``,                  404
``SubscriptionNotFound``
broker ``TopicExists``, ``ConsumerBusy``,  409
``ProducerBusy``, ``NotAllowed``
broker ``ServiceNotReady``,                503     retry
``PersistenceError``, ``TooManyRequests``
storage ``MetadataUnavailable``            503     retry
storage ``BadVersion``                     409     a CAS lost past its retries
storage ``InvalidArgument``                400     the store refused a value
``ShapeError``                             500     the cluster broke its contract: a bug
=========================================  ======  =========================================
"""

from __future__ import annotations

import logging

from aiohttp import web

from georep.broker import errors as broker_errors
from georep.broker.admin.state import METRICS
from georep.domain.topic_name import InvalidTopicName
from georep.rest.middleware import answering
from georep.storage.errors import BadVersion, MetadataUnavailable
from georep.storage.errors import InvalidArgument as StorageInvalidArgument

log = logging.getLogger("georep.broker.admin")

STATUSES: tuple[tuple[type[Exception], int], ...] = (
    (InvalidTopicName, 400),
    (broker_errors.TopicNotFound, 404),
    (broker_errors.SubscriptionNotFound, 404),
    (broker_errors.TopicExists, 409),
    (broker_errors.ConsumerBusy, 409),
    (broker_errors.ProducerBusy, 409),
    (broker_errors.NotAllowed, 409),
    (broker_errors.ServiceNotReady, 503),
    (broker_errors.PersistenceError, 503),
    (broker_errors.TooManyRequests, 503),
    (MetadataUnavailable, 503),
    (BadVersion, 409),
    (StorageInvalidArgument, 400),
)


def _observe(request: web.Request, route: str, status: int, seconds: float) -> None:
    request.app[METRICS].observe(request.method, route, status, seconds)


answer = answering(
    log, STATUSES, _observe, server_error="internal error; the admin log has the details"
)
