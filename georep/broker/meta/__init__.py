"""The broker's metadata: its repositories over storage's metadata engine.

``catalog.py`` keeps tenants, namespaces and partitioned topics; ``schemas.py`` topics'
schema versions and namespaces' compatibility strategies; ``models.py`` their tables.
``store.BrokerRepositories`` builds both repositories over the engine a process opened
(``storage/meta/store.py``): storage owns the engine (transactions, CAS, the clock) and
the one chain of migrations, the broker owns its rows.
"""
