"""The metadata store's schema, owned by Alembic: one revision per change under
``versions/`` (``env.py`` is Alembic's environment)."""
