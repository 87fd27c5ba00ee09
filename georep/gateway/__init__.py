"""The gateway: a sidecar beside one cluster that replicates its topics to other
clusters by policy and keeps subscriptions in step (docs/ARCHITECTURE.md, "Gateway").

Process, top to bottom (imports point down)::

    main (georep gateway) → gateway (store + manager + REST, started and stopped together)
        → admin_app, openapi, metrics (the REST admin: policies, clusters, stats)
        → manager (policies x local topics → the replicators to run), clusters (links)
            → georep/replicator (one topic partition x one remote cluster)
            → georep/subsync (its supervisor, handed the partitions to keep in sync)
                → georep/client (the asyncio Pulsar client, a cluster's admin REST)
        → config (the TOML file; a cluster's table: cluster_endpoint), errors (policy errors)

Policies, remote clusters and the cluster's gateway instances live in the gateway's own
metadata (``gateway/meta``: its repositories over storage's metadata engine). ``georep
up`` (``georep/up/supervisor.py``) runs clusters and gateways together from one file.
"""
