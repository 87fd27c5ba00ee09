"""georep: geo-replication gateway and subscription sync for Pulsar-style messaging."""

__version__ = "0.1.0"
