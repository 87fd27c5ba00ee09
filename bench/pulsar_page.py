"""What Pulsar's Prometheus page costs beside many topics: the change signal the gateway
reads beside real Pulsar (``georep/subsync/pulsar_port.py``, ``MetricsScan``).

One real Apache Pulsar 4.0.7 standalone; ``--partitions`` topic partitions as partitioned
topics of 100 over ``--namespaces`` namespaces, each partitioned topic with
``--subscriptions`` subscriptions (so every partition has them). Then ``--reads`` reads
of ``/metrics/`` plain and as many gzip-compressed, each timed in three parts: serving
and transfer (``serve_s``), decompression and decoding (``decode_s``), and the
gateway's own parse of the four families it reads (``parse_s``,
``pulsar_port.subscription_signals``).

    python bench/pulsar_page.py --partitions 2000

Progress goes to stderr; only the JSON goes to stdout.
"""

from __future__ import annotations

import argparse
import gzip
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from harness import machine, print_figures

from georep.subsync.pulsar_port import subscription_signals
from pulsar_tools.admin import PulsarAdmin
from pulsar_tools.standalone import PULSAR_VERSION, PulsarStandalone, StandaloneSpec, resolve_jars

TENANT = "page"
PER_TOPIC = 100


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def read_page(url: str, encoding: str) -> dict[str, Any]:
    began = time.perf_counter()
    request = urllib.request.Request(url, headers={"Accept-Encoding": encoding})
    with urllib.request.urlopen(request, timeout=120) as answer:
        body = answer.read()
        compressed = answer.headers.get("Content-Encoding") == "gzip"
    served = time.perf_counter()
    text = (gzip.decompress(body) if compressed else body).decode()
    decoded = time.perf_counter()
    return {
        "asked": encoding,
        "compressed": compressed,
        "wire_bytes": len(body),
        "text_bytes": len(text),
        "lines": text.count("\n"),
        "serve_s": round(served - began, 3),
        "decode_s": round(decoded - served, 3),
        "text": text,
    }


def main(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    lib = resolve_jars(say=progress)
    standalone = PulsarStandalone(StandaloneSpec("A", root / "pulsar-A"), lib)
    progress("starting Pulsar standalone A")
    standalone.start()
    try:
        admin = PulsarAdmin(standalone.admin_url)
        admin.ensure_tenant(TENANT, ["A"])
        namespaces = [f"ns{index}" for index in range(args.namespaces)]
        for namespace in namespaces:
            admin.ensure_namespace(TENANT, namespace)
        topics = [
            f"{namespaces[index % len(namespaces)]}/t{index}"
            for index in range(max(1, args.partitions // PER_TOPIC))
        ]
        for index, path in enumerate(topics):
            progress(f"topic {index + 1}/{len(topics)}")
            admin.request("PUT", f"/admin/v2/persistent/{TENANT}/{path}/partitions", PER_TOPIC)
            for number in range(args.subscriptions):
                admin.request("PUT", f"/admin/v2/persistent/{TENANT}/{path}/subscription/s{number}")
        time.sleep(5)  # every partition loaded and on the page
        watched = {f"{TENANT}/{namespace}" for namespace in namespaces}
        reads = []
        for encoding in ("identity", "gzip"):
            for _ in range(args.reads):
                read = read_page(f"{standalone.admin_url}/metrics/", encoding)
                text = read.pop("text")
                began = time.perf_counter()
                signals = subscription_signals(text, watched)
                read["parse_s"] = round(time.perf_counter() - began, 3)
                read["subscriptions_found"] = len(signals)
                reads.append(read)
        return {
            "bench": "pulsar_page",
            "machine": machine(),
            "pulsar": PULSAR_VERSION,
            "partitions": len(topics) * PER_TOPIC,
            "subscriptions_per_partition": args.subscriptions,
            "reads": reads,
        }
    finally:
        standalone.stop()


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=2_000)
    parser.add_argument("--namespaces", type=int, default=10)
    parser.add_argument("--subscriptions", type=int, default=2)
    parser.add_argument("--reads", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="georep-page-") as root:
        print_figures(main(args, Path(root)))


if __name__ == "__main__":
    cli()
