"""A cluster's refusals of the gateway's role: one WARNING per operation and reason, a
count, cleared by a success; the errors that carry them are not retried soon and are
said by the client, not by every replicator."""

from __future__ import annotations

import logging

import pytest

from georep.client.errors import AdminRequestFailed, ServerError, said_once_per_cluster
from georep.client.refusals import Refusals
from georep.wire import pulsar_wire_pb2 as pb


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_a_refusal_is_said_once_counted_and_cleared_by_a_success(caplog):
    caplog.set_level(logging.INFO, logger="georep.client.refusals")
    refusals = Refusals("A")
    for _ in range(3):
        refusals.refused("consume on t/ns", "AUTHORIZATION_ERROR: not authorized")
    assert refusals.current()["consume on t/ns"].count == 3
    assert len(warnings(caplog)) == 1
    assert "cluster A refused the gateway's role: consume on t/ns" in warnings(caplog)[0]
    assert 'docs/PULSAR.md, "Least privilege"' in warnings(caplog)[0]

    refusals.refused("consume on t/ns", "AUTHENTICATION_ERROR: token expired")
    assert len(warnings(caplog)) == 2  # another reason is said again
    assert refusals.current()["consume on t/ns"].count == 4

    refusals.allowed("consume on other/ns")  # another operation: nothing changes
    assert "consume on t/ns" in refusals.current()
    refusals.allowed("consume on t/ns")
    assert refusals.current() == {}
    assert refusals.total == 4


@pytest.mark.parametrize(
    ("error", "refused"),
    [
        (ServerError("x", pb.AUTHORIZATION_ERROR), True),
        (ServerError("x", pb.AUTHENTICATION_ERROR), True),
        (ServerError("x", pb.TOPIC_NOT_FOUND), False),
        (AdminRequestFailed("x", 401), True),
        (AdminRequestFailed("x", 403), True),
        (AdminRequestFailed("x", 404), False),
        (AdminRequestFailed("x", 503), False),
    ],
)
def test_refusing_errors_are_not_retried_soon_and_are_said_by_the_client(error, refused):
    assert error.refused is refused
    assert said_once_per_cluster(error) is refused
    if refused:
        assert not error.retriable
