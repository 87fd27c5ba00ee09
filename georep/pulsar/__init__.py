"""Real Apache Pulsar on this machine: the anchor georep is measured against.

``standalone`` resolves Pulsar's jars from Maven Central into a cache outside the
repository and runs a Pulsar standalone (broker + one in-process bookie + RocksDB
metadata) on chosen loopback ports; ``admin`` is the small part of Pulsar's admin v2
REST that the tests, the drill and the benchmarks use (clusters, tenants, namespaces,
geo-replication, cursor state). See ``docs/PULSAR.md``.
"""
