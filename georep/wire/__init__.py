"""The Pulsar binary protocol, as data: what the embedded broker (``broker/``) speaks to
pulsar-client, and our own asyncio client (``client/``) to any Pulsar broker.

- ``pulsar_wire.proto`` / ``pulsar_wire_pb2``: our schema of the protocol subset
  (regenerate the module with ``tools/regenerate_protos.sh``).
- ``commands``: the registry of command types, builders for what the broker sends, and
  the error reply each request expects.
- ``frames``: the sans-I/O frame codec (sizes, checksum, metadata, FrameDecoder).
- ``batch``: splitting and building batched payloads.
- ``errors``: the codec's operating errors.

No module here touches a socket; the connection state machines and asyncio glue live
above this package, in ``broker/connection.py`` and ``client/connection.py``.
"""
