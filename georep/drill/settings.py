"""A drill's settings: the flags of ``georep drill``, checked into one typed object.

Every refusal is a :class:`DrillUsageError` naming the flag (exit 2). Rules beyond each
flag's own range:

- Clusters "by URL" (``--a-service-url`` ...) are used when any such flag is given; then
  the service and admin URLs of both A and B are required, ``--fail kill`` is refused
  (the drill does not own A's processes, so it cannot kill them), ``--fail cut-link``
  needs both gateway URLs (the link is cut over the gateways' REST), ``--mode both`` is
  refused (the gateways run one mode, which the drill cannot change) and ``--data`` is
  meaningless.
- ``--mode pulsar`` runs real Apache Pulsar standalones that the drill starts itself
  (never running clusters); ``--mode all`` is ``pulsar``, ``pulsar-compatible`` and
  ``full`` on the same scenario and seed, one after the other.
- ``--beside-pulsar`` runs georep's gateways beside two real Apache Pulsar standalones
  that the drill starts (beside_pulsar.py) instead of georep's embedded clusters: the
  gateways replicate and sync there, in ``full`` mode only (a gateway beside Pulsar
  refuses ``pulsar-compatible``: that is Pulsar's own replicated subscriptions, ``--mode
  pulsar``). So ``--mode pulsar-compatible`` and ``both`` are refused with it, ``--mode
  all`` is ``pulsar`` and ``full`` beside Pulsar, and running clusters are refused.
- ``--failback`` goes with every scenario, failure and mode; on running clusters it
  restores the link the ``cut-link`` cut (the topic's policies removed again).
- ``--at`` is the fraction of the messages delivered on A before the failure:
  ``0 < at <= 1``, and at least one message.
"""

from __future__ import annotations

import argparse
import math
import re
from dataclasses import dataclass
from pathlib import Path

from georep import limits
from georep.drill.errors import DrillUsageError
from georep.drill.scenarios import SCENARIOS

FULL = "full"
PULSAR_COMPATIBLE = "pulsar-compatible"
#: Not a georep mode: real Apache Pulsar standalones with Pulsar's own geo-replication and
#: replicated subscriptions, no gateway (pulsar_topology.py), the anchor beside georep's.
PULSAR = "pulsar"
BOTH = "both"
ALL = "all"
MODES = (PULSAR_COMPATIBLE, FULL)
#: What ``--mode`` takes, and the modes each group runs (in this order on the page).
MODE_CHOICES = {FULL: (FULL,), PULSAR_COMPATIBLE: (PULSAR_COMPATIBLE,), PULSAR: (PULSAR,),
                BOTH: MODES, ALL: (PULSAR, PULSAR_COMPATIBLE, FULL)}  # fmt: skip
#: The same beside real Pulsar (``--beside-pulsar``), where the gateways sync in full mode only.
MODE_CHOICES_BESIDE_PULSAR = {FULL: (FULL,), PULSAR: (PULSAR,), ALL: (PULSAR, FULL)}
KILL = "kill"
CUT_LINK = "cut-link"
FAILURES = (KILL, CUT_LINK)

_NAMESPACE = re.compile(r"[-=:.\w]+/[-=:.\w]+", re.ASCII)


@dataclass(frozen=True)
class ClusterUrls:
    """A running cluster: its broker, its admin REST, and (optionally) its gateway."""

    service_url: str
    admin_url: str
    gateway_url: str | None


@dataclass(frozen=True)
class DrillSettings:
    scenario: str
    messages: int
    keys: int
    at: float
    fail: str
    modes: tuple[str, ...]
    settle_s: float
    #: Messages a second produced on A, and handled by the consumers on A together
    #: (0: as fast as they can).
    produce_rate_per_s: float = 0.0
    consume_rate_per_s: float = 0.0
    out: Path | None = None
    json: bool = False
    data: Path | None = None
    namespace: str = "public/default"
    seed: int = 1
    progress: bool = True
    #: Clusters A and B by URL; None: the drill stands them up itself.
    running: dict[str, ClusterUrls] | None = None
    #: After the failover, bring A back and move the consumers home (failback.py).
    failback: bool = False
    #: georep's modes run with gateways beside real Pulsar standalones (beside_pulsar.py).
    beside_pulsar: bool = False

    @property
    def managed(self) -> bool:
        return self.running is None

    @property
    def target_on_a(self) -> int:
        """Distinct messages delivered on A before the consumers stop."""
        return max(1, math.ceil(self.at * self.messages))


def settings_from_args(args: argparse.Namespace) -> DrillSettings:
    if args.scenario not in SCENARIOS:
        raise DrillUsageError(f"--scenario {args.scenario!r}: use one of {', '.join(SCENARIOS)}")
    if not 1 <= args.messages <= limits.drill_messages_count_max:
        raise DrillUsageError(
            f"--messages {args.messages}: must be in 1..{limits.drill_messages_count_max}"
        )
    if not 1 <= args.keys <= limits.drill_keys_count_max:
        raise DrillUsageError(f"--keys {args.keys}: must be in 1..{limits.drill_keys_count_max}")
    if not (0.0 < args.at <= 1.0) or math.isnan(args.at):
        raise DrillUsageError(f"--at {args.at}: must be a fraction in (0, 1]")
    if not (0.0 <= args.settle <= limits.drill_settle_s_max):
        raise DrillUsageError(
            f"--settle {args.settle}: must be in 0..{limits.drill_settle_s_max} s"
        )
    for flag, rate in (
        ("--produce-rate", args.produce_rate),
        ("--consume-rate", args.consume_rate),
    ):
        if not (0.0 <= rate <= limits.drill_rate_per_s_max):
            raise DrillUsageError(
                f"{flag} {rate}: must be in 0..{limits.drill_rate_per_s_max:g} messages/s"
                " (0: no limit)"
            )
    if args.fail not in FAILURES:
        raise DrillUsageError(f"--fail {args.fail!r}: use {' or '.join(FAILURES)}")
    if args.mode not in MODE_CHOICES:
        raise DrillUsageError(f"--mode {args.mode!r}: use {', '.join(MODE_CHOICES)}")
    if not _NAMESPACE.fullmatch(args.namespace):
        raise DrillUsageError(f"--namespace {args.namespace!r}: not tenant/namespace")
    modes = MODE_CHOICES[args.mode]
    if args.beside_pulsar:
        modes = _beside_pulsar(args)
    running = _running(args, modes)
    return DrillSettings(
        scenario=args.scenario,
        messages=args.messages,
        keys=args.keys,
        at=args.at,
        fail=args.fail,
        modes=modes,
        settle_s=args.settle,
        produce_rate_per_s=args.produce_rate,
        consume_rate_per_s=args.consume_rate,
        out=args.out,
        json=args.json,
        data=args.data,
        namespace=args.namespace,
        seed=args.seed,
        progress=not args.no_progress,
        running=running,
        failback=args.failback,
        beside_pulsar=args.beside_pulsar,
    )


def _beside_pulsar(args: argparse.Namespace) -> tuple[str, ...]:
    """The modes ``--mode`` runs with ``--beside-pulsar``."""
    if args.mode not in MODE_CHOICES_BESIDE_PULSAR:
        raise DrillUsageError(
            f"--beside-pulsar --mode {args.mode}: beside a real Pulsar cluster the gateways"
            " sync in full mode only (pulsar-compatible there is Pulsar's own replicated"
            f" subscriptions, --mode pulsar); use {', '.join(MODE_CHOICES_BESIDE_PULSAR)}"
        )
    if any(getattr(args, flag[2:].replace("-", "_")) for flag in _URL_FLAGS.values()):
        raise DrillUsageError(
            "--beside-pulsar needs clusters the drill stands up itself (Pulsar standalones)"
        )
    return MODE_CHOICES_BESIDE_PULSAR[args.mode]


_URL_FLAGS = {
    (cluster, kind): f"--{cluster.lower()}-{kind}-url"
    for cluster in ("A", "B")
    for kind in ("service", "admin", "gateway")
}


def _running(args: argparse.Namespace, modes: tuple[str, ...]) -> dict[str, ClusterUrls] | None:
    urls = {key: getattr(args, flag[2:].replace("-", "_")) for key, flag in _URL_FLAGS.items()}
    given = {key: url for key, url in urls.items() if url}
    if not given:
        return None
    missing = [
        _URL_FLAGS[(cluster, kind)]
        for cluster in ("A", "B")
        for kind in ("service", "admin")
        if (cluster, kind) not in given
    ]
    if missing:
        raise DrillUsageError(f"running clusters need {', '.join(missing)} as well")
    for (cluster, kind), url in given.items():
        scheme = ("pulsar://",) if kind == "service" else ("http://", "https://")
        if not url.startswith(scheme):
            raise DrillUsageError(
                f"{_URL_FLAGS[(cluster, kind)]} {url!r}: must start with {' or '.join(scheme)}"
            )
    if args.fail == KILL:
        raise DrillUsageError(
            "--fail kill needs clusters the drill stands up itself (it must own A's processes"
            " to kill them); with running clusters use --fail cut-link"
        )
    if ("A", "gateway") not in given or ("B", "gateway") not in given:
        raise DrillUsageError(
            "--fail cut-link on running clusters needs --a-gateway-url and --b-gateway-url"
            " (the link is cut over the gateways' REST)"
        )
    if len(modes) > 1:
        raise DrillUsageError(
            f"--mode {args.mode} needs clusters the drill stands up itself: running gateways"
            " run the one mode they were configured with"
        )
    if PULSAR in modes:
        raise DrillUsageError(
            "--mode pulsar needs clusters the drill stands up itself (Pulsar standalones)"
        )
    if args.data is not None:
        raise DrillUsageError("--data is for clusters the drill stands up; not with running ones")
    return {
        cluster: ClusterUrls(
            given[(cluster, "service")],
            given[(cluster, "admin")].rstrip("/"),
            given.get((cluster, "gateway"), "").rstrip("/") or None,
        )
        for cluster in ("A", "B")
    }
