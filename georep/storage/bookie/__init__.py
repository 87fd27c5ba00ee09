"""One bookie, one storage node: its write-ahead journal (group commit), write cache,
entry logs and SQLite index tied by checkpoints, the disk it watches, fault injection, and
its network face speaking the bookie protocol (``georep bookie``)."""
