"""Pulsar's spelling of a message's schema version, read as the official client hands it.

A version is 8 bytes, a big-endian long, in the message's metadata; a message that names
no schema carries none. The Python client's ``Message.schema_version()`` hands the bytes
over as ``str`` in some builds (each code point one byte), as ``bytes`` in others.
"""

from __future__ import annotations


def version_number(raw: bytes | str | None) -> int | None:
    """The version ``raw`` names; None for a message that names none.

    >>> version_number(b"\\x00" * 7 + b"\\x02"), version_number("\\x00" * 7 + "\\xff")
    (2, 255)
    >>> version_number(b""), version_number(None)
    (None, None)
    """
    if not raw:
        return None
    data = raw.encode("latin-1") if isinstance(raw, str) else raw
    return int.from_bytes(data, "big")
