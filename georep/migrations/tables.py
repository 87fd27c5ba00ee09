"""Every table the migrations own, on one SQLAlchemy ``MetaData``.

Storage declares it (``storage/meta/models.py``) and its own tables; the broker's
(``broker/meta/models.py``) and the gateway's (``gateway/meta/models.py``) models add
theirs when imported. Importing them all here keeps one chain of migrations for the one
database: Alembic's environment (``env.py``) and the schema tests compare the migrated
database with :data:`metadata`. Storage never imports the layers above it; this package
sits above all three.
"""

from __future__ import annotations

from georep.broker.meta import models as broker_models
from georep.gateway.meta import models as gateway_models
from georep.storage.meta import models as storage_models

#: The modules whose tables are on :data:`metadata` (imported for that).
MODELS = (storage_models, broker_models, gateway_models)

#: Every table of the metadata database.
metadata = storage_models.metadata
