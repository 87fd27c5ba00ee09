"""Auto-recovery: the auditor marks ledgers that had a copy on a lost bookie, and
replication workers restore those copies from surviving replicas (``georep
autorecovery``)."""
