"""The embedded cluster's admin REST (aiohttp), following Pulsar's admin v2."""
