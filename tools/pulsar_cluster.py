#!/usr/bin/env python3
"""Run an Apache Pulsar cluster of several brokers on loopback: ZooKeeper, one bookie
and brokers, from the jars tools/pulsar_standalone.py resolves.

    tools/pulsar_cluster.py --name A               # two brokers; Ctrl-C stops them all
    tools/pulsar_cluster.py --name A --brokers 3

The work is done by ``pulsar_tools.cluster`` (see ``docs/PULSAR.md``).
"""

import sys

from pulsar_tools.cluster import main

if __name__ == "__main__":
    sys.exit(main())
