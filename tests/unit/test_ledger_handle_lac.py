"""Property: whatever order bookie acks arrive in, LAC advances strictly in order and
only over entries confirmed by Qa distinct bookies of their write set.

The handle is the real LedgerHandle; only the transport is scripted, so Hypothesis
chooses the interleaving of acknowledgements (the thing we cannot steer with real
processes) deterministically and shrinks a failure to its smallest schedule.
"""

import asyncio
from typing import cast

from hypothesis import given, settings
from hypothesis import strategies as st

from georep.storage import bookie_protocol
from georep.storage.client.client_context import ClientContext
from georep.storage.client.distribution_schedule import Quorums
from georep.storage.client.ledger_handle import LedgerHandle
from georep.storage.meta.ledger_metadata import LedgerMetadata


class ScriptedClient:
    def __init__(self, pool, bookie):
        self.pool, self.bookie = pool, bookie

    def send_frame(self, request_id, frame, complete):
        (message,) = bookie_protocol.FrameDecoder(responses=False).feed(frame)
        assert isinstance(message, bookie_protocol.AddRequest)
        self.pool.sent.append((self.bookie, message.entry_id, request_id, complete))


class ScriptedPool:
    def __init__(self):
        self.sent = []
        self._ids = iter(range(1, 10**9))

    def next_request_id(self):
        return next(self._ids)

    def get(self, bookie):
        return ScriptedClient(self, bookie)


class FakeBookKeeper:
    def __init__(self):
        self.clients = ScriptedPool()


configs = st.sampled_from([(3, 3, 2), (3, 2, 2), (3, 3, 1), (5, 3, 2), (1, 1, 1), (4, 3, 3)])


@settings(max_examples=300, deadline=None)
@given(configs, st.integers(1, 12), st.data())
def test_lac_in_order_and_only_over_quorum(config, entries, data):
    e, qw, qa = config
    asyncio.run(_scenario(e, qw, qa, entries, data))


async def _scenario(e, qw, qa, entries, data):
    bk = FakeBookKeeper()
    ensemble = tuple(f"b{i}" for i in range(e))
    metadata = LedgerMetadata(7, e, qw, qa, ((0, ensemble),), version=1)
    handle = LedgerHandle(cast(ClientContext, bk), metadata)
    quorums = Quorums(e, qw, qa)
    futures = [await handle.add_async(f"p{i}".encode()) for i in range(entries)]
    sent = bk.clients.sent
    assert len(sent) == entries * qw
    for bookie, entry_id, _, _ in sent:
        assert ensemble.index(bookie) in quorums.write_set(entry_id)

    # deliver a chosen subset of acks in a chosen order
    order = data.draw(st.permutations(range(len(sent))))
    keep = data.draw(st.integers(0, len(sent)))
    acked: dict[int, set[str]] = {i: set() for i in range(entries)}
    lac_seen = [handle.last_add_confirmed]
    for position in order[:keep]:
        bookie, entry_id, request_id, complete = sent[position]
        complete(
            bookie_protocol.AddResponse(request_id, bookie_protocol.Status.OK, "", 7, entry_id)
        )
        acked[entry_id].add(bookie)
        lac = handle.last_add_confirmed
        assert lac >= lac_seen[-1], "LAC moved backwards"
        lac_seen.append(lac)
        # LAC is exactly the longest prefix whose entries all have Qa acks
        expected = -1
        while expected + 1 < entries and len(acked[expected + 1]) >= qa:
            expected += 1
        assert lac == expected, (lac, expected, acked)
    await asyncio.sleep(0)
    for entry_id, future in enumerate(futures):
        assert future.done() == (entry_id <= handle.last_add_confirmed)
        if future.done():
            assert future.result() == entry_id
