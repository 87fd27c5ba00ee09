"""Spark reconciliation (docs/AUDIT.md): what a failover would cost, measured from outside.

- ``export.py``        ``georep export``: one cluster's message index and subscription
                       states, read with the official client and the admin REST, as
                       Parquet (``schema.py``).
- ``inputs.py``        the job's input: exports (and a drill's delivery log) checked and
                       loaded as DataFrames.
- ``reconciliation.py`` the DataFrame transformations: translated positions, redelivery
                       risk, replication gaps, observed duplicates and losses.
- ``report.py``        the HTML summary and its SVG chart, from small aggregates.
- ``job.py``           ``georep reconcile`` and ``spark-submit georep/spark_reconcile/job.py``.

The job is plain DataFrame code: no asyncio, no I/O besides reading its inputs and
writing its outputs, no Python UDFs.
"""
