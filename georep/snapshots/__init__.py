"""Replicated snapshots and markers: the control entries replication carries
(``markers.proto``, encoded and checked by ``markers.py``), the protocol state of taking a
snapshot without I/O (``snapshot_controller.py``) and the completed snapshots a
subscription can still use (``snapshot_cache.py``)."""
