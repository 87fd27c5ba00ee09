"""Spark reconciliation (docs/AUDIT.md): what a failover would cost, measured from outside.

- ``export.py``        ``georep export``: one cluster's message index and subscription
                       states, read with the official client and the admin REST, as
                       Parquet (``schema.py``).
- ``inputs.py``        the job's input: exports (and a drill's delivery log) checked and
                       loaded as DataFrames.
- ``columns.py``       the keys the transformations group and join by.
- ``acknowledged_ranges.py`` each message's acknowledgements, by a range join.
- ``reconciliation.py`` the DataFrame transformations: translated positions, redelivery
                       risk, replication gaps, duplicate copies, the summaries.
- ``observed.py``      a drill's delivery log: observed duplicates, redeliveries, losses.
- ``page_figures.py``  the page's small aggregates, collected from the written tables.
- ``report.py``        the HTML summary and its SVG chart (``georep.reports`` toolkit).
- ``job.py``           ``georep reconcile`` and ``spark-submit georep/spark_reconcile/job.py``:
                       the Spark session and the steps in order.

The job is plain DataFrame code: no asyncio, no I/O besides reading its inputs and
writing its outputs, no Python UDFs.
"""
