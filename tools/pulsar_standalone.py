#!/usr/bin/env python3
"""Resolve Apache Pulsar from Maven Central and run a standalone on loopback.

    tools/pulsar_standalone.py --resolve-only        # fetch the jars into the cache
    tools/pulsar_standalone.py --name A              # run one; Ctrl-C stops it

The work is done by ``pulsar_tools.standalone`` (see ``docs/PULSAR.md``).
"""

import sys

from pulsar_tools.standalone import main

if __name__ == "__main__":
    sys.exit(main())
