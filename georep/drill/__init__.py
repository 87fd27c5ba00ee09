"""The failover drill (``georep drill``; semantics in docs/DRILL.md).

Modules, in the order a drill uses them:

- ``settings.py``     the flags, checked into one typed object
- ``scenarios.py``    how consumers on A acknowledge (pure policies)
- ``topology.py``     clusters A and B with gateways: stood up (georep up's pieces) or
                      running ones by URL; the failures (kill, cut-link)
- ``traffic.py``      producing and consuming with the official pulsar-client
- ``delivery_log.py`` one record per delivery, written as deliveries.jsonl
- ``drill_op.py``     one drill in one sync mode, step by step
- ``report.py``       the arithmetic: duplicates, redelivered, lost (pure)
- ``report_page.py``  report.html: the verdict, the figures, a column per target
- ``report_charts.py`` its SVG charts (deliveries, sync lag, replication backlog)
- ``progress.py``     the progress bar on stderr
- ``rest.py``         the few admin and gateway REST calls
- ``main.py``         the command
"""
