"""Real Apache Pulsar on this machine: the anchor georep is measured against.

Development tooling, beside georep and not part of it: the tests (``tests/pulsar``), the
benchmarks (``bench/``), ``tools/pulsar_*.py`` and the drill's real-Pulsar modes use it;
georep's runtime never imports it (the drill imports it where such a mode uses it,
``georep/drill/pulsar_tooling.py``). It is its own distribution (``pyproject.toml``
here), installed in a checkout's environment by ``make`` and never into georep's wheel
or image.

``standalone`` resolves Pulsar's jars from Maven Central into a cache outside the
repository and runs a Pulsar standalone (broker + one in-process bookie + RocksDB
metadata) on chosen loopback ports; ``cluster`` runs a cluster of several brokers from
the same jars; ``security`` turns on TLS and token authentication; ``admin`` is the
small part of Pulsar's admin v2 REST that the tests, the drill and the benchmarks use
(clusters, tenants, namespaces, geo-replication, cursor state). See ``docs/PULSAR.md``.
What georep's runtime reads of Pulsar's pages (a cursor's text, a schema version) is
``georep/pulsar_text``.
"""
