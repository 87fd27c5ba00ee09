"""Managed ledgers (a topic partition's log over many ledgers) and cursors (a
subscription's acknowledgements), on the ledger client and the metadata store.

``factory.ManagedLedgerFactory`` opens logs; ``managed_ledger.ManagedLedger`` appends,
reads, rolls over and trims; ``cursor.ManagedCursor`` acknowledges and persists.
``position``, ``range_set`` and ``ack_state`` are the pure arithmetic under them,
``cursor_state`` the persisted format, ``config`` the settings.
"""
