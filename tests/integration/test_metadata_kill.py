"""kill -9 of a process writing metadata: every write whose call returned is in the store
after it reopens (``storage/meta/engine.py``, group commit).

The writer process runs several coroutines at once, so on SQLite their writes share
commits; each prints a write only after its call returned. The test kills it with
SIGKILL while it writes, a few times over the same database, and checks every printed
write. SIGKILL keeps what the process handed the kernel, so this checks that a call
returns only after its transaction committed, not the sync to the disk itself.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import textwrap

import pytest

from georep.runtime.awaiting import within
from georep.storage.meta.store import MetadataStore

pytestmark = pytest.mark.slow

WRITERS = 16
KILLS = 3

WRITER = textwrap.dedent("""
    import asyncio, json, sys
    from georep.storage.meta.managed_ledgers import LedgerInfo
    from georep.storage.meta.store import MetadataStore

    async def main(url, round_, writers):
        store = await MetadataStore.open(url)

        def said(**record):
            print(json.dumps(record), flush=True)

        async def writer(number):
            for n in range(1_000_000):
                name = f"t/ns/persistent/r{round_}-w{number}-{n}"
                info = await store.managed_ledgers.create_managed_ledger(name)
                said(managed_ledger=name)
                ledger = await store.ledgers.create_ledger(
                    ensemble_size=1, write_quorum=1, ack_quorum=1, ensemble=["bookie-1"]
                )
                said(ledger=ledger.ledger_id, version=ledger.version, custom={})
                ledger = await store.ledgers.update_ledger(ledger.replace(custom={"n": str(n)}))
                said(ledger=ledger.ledger_id, version=ledger.version, custom={"n": str(n)})
                info = await store.managed_ledgers.update_managed_ledger(
                    info.replace(ledgers=(LedgerInfo(ledger.ledger_id),))
                )
                said(managed_ledger=name, version=info.version, ledger=ledger.ledger_id)
                cursor = await store.managed_ledgers.create_managed_cursor(
                    name, "sub", cursor_ledger_id=None, mark_delete=(ledger.ledger_id, -1)
                )
                said(cursor=name, version=cursor.version, mark_delete=[ledger.ledger_id, -1])
                cursor = await store.managed_ledgers.update_managed_cursor(
                    cursor.replace(mark_delete=(ledger.ledger_id, n))
                )
                said(cursor=name, version=cursor.version, mark_delete=[ledger.ledger_id, n])

        said(ready=True)
        await asyncio.gather(*(writer(number) for number in range(writers)))

    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
""")


async def _write_until_killed(script, url: str, round_: int) -> list[dict]:
    """Start the writer, SIGKILL it once it has printed a few hundred writes; every
    complete line it printed (what it read back after its call returned)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        url,
        str(round_),
        str(WRITERS),
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    records: list[dict] = []
    try:
        while len(records) < 300 + 150 * round_:
            line = await within(process.stdout.readline(), 60)
            assert line.endswith(b"\n"), f"the writer ended: {line!r}"
            records.append(json.loads(line))
    finally:
        process.send_signal(signal.SIGKILL)
    rest = await process.stdout.read()
    await process.wait()
    assert process.returncode == -signal.SIGKILL
    *complete, _partial = rest.split(b"\n")
    records.extend(json.loads(line) for line in complete)
    return [record for record in records if "ready" not in record]


async def test_kill_9_keeps_every_returned_write(tmp_path) -> None:
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    url = f"sqlite:///{tmp_path / 'metadata.db'}"
    await (await MetadataStore.open(url)).close()  # migrated once, before the kills
    for round_ in range(KILLS):
        records = await _write_until_killed(script, url, round_)
        store = await MetadataStore.open(url)
        try:
            for record in records:
                await _check_stored(store, record)
        finally:
            await store.close()


async def _check_stored(store: MetadataStore, record: dict) -> None:
    """The write ``record`` says returned is stored: its version or a later one (a later
    write of the same row may have returned too)."""
    if "cursor" in record:
        cursors = await store.managed_ledgers.list_managed_cursors(record["cursor"])
        assert [cursor.name for cursor in cursors] == ["sub"], record
        assert cursors[0].version >= record["version"], record
        if cursors[0].version == record["version"]:
            assert list(cursors[0].mark_delete) == record["mark_delete"], record
    elif "managed_ledger" in record:
        info = await store.managed_ledgers.get_managed_ledger(record["managed_ledger"])
        if "version" in record:
            assert info.version >= record["version"], record
            assert info.ledgers[0].ledger_id == record["ledger"], record
    else:
        ledger = await store.ledgers.get_ledger(record["ledger"])
        assert ledger.version >= record["version"], record
        if ledger.version == record["version"]:
            assert dict(ledger.custom) == record["custom"], record
