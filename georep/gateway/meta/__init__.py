"""The gateway's metadata: its repositories over storage's metadata engine.

``replication_policies.py`` keeps remote clusters and replication policies;
``subscription_sync_policies.py`` which subscriptions each namespace or topic syncs;
``members.py`` the gateway instances of a cluster (``gateway/ownership.py``);
``models.py`` their tables. ``store.GatewayRepositories`` builds the three repositories over
the engine the gateway opened (``storage/meta/store.py``): storage owns the engine
(transactions, CAS, the clock) and the one chain of migrations, the gateway owns its rows.
"""
