"""The broker's repositories, built over storage's metadata engine.

A process opens one :class:`~georep.storage.meta.store.MetadataStore` (the engine and
storage's repositories) and gives the broker ``BrokerRepositories(store.engine)``; closing
the store closes the engine these repositories use.
"""

from __future__ import annotations

from georep.broker.meta.catalog import CatalogRepository
from georep.broker.meta.schemas import SchemaRepository
from georep.storage.meta.engine import MetadataEngine


class BrokerRepositories:
    """The broker's repositories on one engine: the catalog and the schema registry's."""

    def __init__(self, engine: MetadataEngine) -> None:
        self.catalog = CatalogRepository(engine)
        self.schemas = SchemaRepository(engine)
