"""The gateway: replication of topics between clusters by policy (docs/ARCHITECTURE.md,
"Gateway").

Process and data path, top to bottom (imports point down it)::

    main (georep gateway) → gateway (store + manager + REST, started and stopped together)
        → rest, rest_openapi, metrics (the REST admin: policies, clusters, stats)
        → manager (policies x local topics → the replicators that should run)
            → replicator (one topic partition x one remote cluster)
                → pulsar_link (asyncio Pulsar client) → link_producer / link_consumer
                    → link_connection → broker/protocol (the wire codec, no I/O)
                → admin_client (a cluster's admin REST)
                → origin (sequence ids, origin metadata, loop rules; pure)
                → rate_limiter (token buckets; pure)
        → config (the TOML file), errors (operating errors of all of the above)

Policies and remote clusters live in the gateway's own metadata store
(``storage/meta/store.py``, revision 0004). ``georep up`` (``georep/up.py``) runs clusters
and gateways together from one file.
"""
