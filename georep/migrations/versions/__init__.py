"""The metadata schema's revisions, in order (0001 ledgers and bookies, onwards)."""
