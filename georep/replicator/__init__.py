"""Replication of one topic partition to one remote cluster (docs/ARCHITECTURE.md,
"Gateway"): what the gateway (``georep/gateway/``) runs one of per partition and remote.

- ``replicator``: reads a durable subscription on the local topic and re-publishes each
  entry verbatim to the remote, deduplicated by sequence id, acknowledging what the
  remote has persisted;
- ``settings``: its buffers, rate limits and retry delays; ``counters``: what it
  counted, and the rates sampled from that;
- ``origin``: sequence ids, origin metadata and the loop rules (pure);
- ``rate_limiter``: token buckets (pure);
- ``errors``: what stops a replicator at an entry.

It talks to clusters through ``georep/client`` only, and imports nothing of the gateway
or of subscription sync.
"""
