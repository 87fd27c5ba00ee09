"""The ledger client: creating, opening, recovering and deleting ledgers
(``bookkeeper.py``), writing them (``ledger_handle.py``: pipelined adds, LAC, ensemble
change) and reading them (``read_handle.py``), over one pipelined connection per bookie;
quorum arithmetic and bookie placement beside them."""
