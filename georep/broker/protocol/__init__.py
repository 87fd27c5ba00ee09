"""The Pulsar binary protocol, as data: what the embedded broker speaks to pulsar-client.

- ``pulsar_wire.proto`` / ``pulsar_wire_pb2``: our schema of the protocol subset
  (regenerate the module with ``tools/regenerate_protos.sh``).
- ``commands``: the registry of command types, builders for what the broker sends, and
  the error reply each request expects.
- ``frames``: the sans-I/O frame codec (sizes, checksum, metadata, FrameDecoder).
- ``batch``: splitting and building batched payloads.
- ``errors``: the codec's operating errors.

No module here touches a socket; the connection state machine and asyncio glue live
above this package.
"""
