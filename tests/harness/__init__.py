"""What the tests share: processes and clusters to test against (bookies, brokers,
gateways, storage clusters), the Prometheus text reader, the failover checks run beside
Pulsar, and the one wait helper (:func:`tests.harness.waiting.wait_for`)."""
