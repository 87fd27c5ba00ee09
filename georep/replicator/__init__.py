"""The gateway: replication of topics between clusters by policy (DESIGN §5).

Data path, top to bottom (imports point down it)::

    gateway (REST, process) → manager (policies x topics → replicators)
        → replicator (one topic partition x one remote)
            → pulsar_link (asyncio Pulsar client) → link_producer / link_consumer
                → link_connection → broker/protocol (the wire codec, no I/O)
            → admin_client (a cluster's admin REST)
        → origin (sequence ids, origin metadata, loop rules; pure)
        → rate_limiter (token buckets; pure)
"""
