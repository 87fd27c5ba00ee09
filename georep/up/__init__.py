"""``georep up``: clusters and gateways from one TOML file, supervised
(:mod:`georep.up.supervisor`), the file's reading (:mod:`georep.up.config`) and
``up --demo`` (:mod:`georep.up.demo`)."""
