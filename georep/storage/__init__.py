"""The storage layer, BookKeeper's shape (docs/ARCHITECTURE.md, "Storage"): bookies
(``bookie/``), the ledger client (``client/``), managed ledgers and cursors
(``managed_ledger/``), the metadata store (``meta/``) and auto-recovery
(``replication/``); at this level the entry format (``entry.py``), the bookie protocol
(``bookie_protocol.py``), storage errors and the storage demo (``georep demo``). It
knows nothing of the broker."""
