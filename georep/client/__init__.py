"""Our asyncio Pulsar client, and a client of a cluster's admin REST: what the gateway
(replicators, subscription sync), the drill and the export use to talk to a cluster, a
georep one or a real Apache Pulsar one, over public interfaces only.

Top to bottom (imports point down)::

    link (PulsarLink: one connection per cluster, lookups, producers and consumers)
        → producer (LinkProducer), consumer (LinkConsumer)
            → connection (LinkConnection: the state machine over one socket)
                → georep/wire (the wire codec, no I/O)
    admin (ClusterAdminClient: the admin REST, aiohttp)
    errors (LinkError and its kinds, each saying whether a retry may help)

The layering is aiokafka's: the codec knows nothing of sockets, the connection nothing of
topics, the link nothing of replication.
"""
