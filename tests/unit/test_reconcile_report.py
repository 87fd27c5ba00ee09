"""The reconcile page without Spark: the verdict per link in words and shares, problems
apart from inventory and coloured when non-zero, readable column names, the failover
shaded on its topic's timeline, the inputs named."""

from __future__ import annotations

import re

import pytest

from georep.spark_reconcile.report import RISK_MEANING, link_verdict, render

FIRST_MS = 1_764_000_000_000


def link(**figures) -> dict:
    base = {
        "origin_cluster": "A", "replica_cluster": "B", "published": 600,
        "replication_gap": 0, "duplicate_copies": 0, "acked_on_origin": 300,
        "redelivery_risk": 0, "skip_risk": 0, "worst": None,
    }  # fmt: skip
    return {**base, **figures}


WORST = {
    "topic": "persistent://geo/ns/orders", "subscription": "s", "origin_mdp": "1:150",
    "translated_mdp": "4:150", "replica_mdp": "4:68",
}  # fmt: skip


@pytest.mark.parametrize(
    ("figures", "word", "headline", "why"),
    [
        (
            {},
            "pass",
            "A → B: 0 missing (0% of 600 published), 0 stored twice; a failover to B at"
            " export time would deliver 0 again (0% of 300 acknowledged on A) and skip 0",
            "Every message of A is on B once, and the cursors agree.",
        ),
        (
            {"redelivery_risk": 82, "worst": WORST},
            "at risk",
            "A → B: 0 missing (0% of 600 published), 0 stored twice; a failover to B at"
            " export time would deliver 82 again (27% of 300 acknowledged on A) and skip 0",
            "Most at risk: subscription s on persistent://geo/ns/orders: A's mark-delete"
            " 1:150 lands on B at 4:150; B's own is 4:68.",
        ),
        (
            {"replication_gap": 3, "worst": WORST},
            "fail",
            "A → B: 3 missing (0.5% of 600 published), 0 stored twice; a failover to B at"
            " export time would deliver 0 again (0% of 300 acknowledged on A) and skip 0",
            "3 messages of A never reached B.",
        ),
        (
            {"undecodable_copies": 4},
            "fail",
            "A → B: 0 missing (0% of 600 published), 0 stored twice; a failover to B at"
            " export time would deliver 0 again (0% of 300 acknowledged on A) and skip 0",
            "4 copies on B name a schema version that is not their origin's schema there:"
            " undecodable as written (undecodable_copies).",
        ),
    ],
)
def test_a_link_verdict_in_words(figures, word, headline, why):
    assert link_verdict(link(**figures)) == (word, headline, why)


def page(**extra) -> str:
    return render(
        title="georep reconciliation of A, B, 2026-11-26 05:20 UTC",
        totals={"messages": 600, "clusters": 2, "replication_gap": 0, "redelivery_risk": 82,
                "skip_risk": 0, "observed_duplicates": 5, "observed_losses": 0,
                "observed_redeliveries": 12},
        tables=[("Subscriptions", "per subscription",
                 [{"redelivery_risk": 82, "skip_risk": 0, "origin_mdp": "1:150",
                   "topic": "persistent://geo/ns/orders"}], 1)],
        timelines={"persistent://geo/ns/orders": {
            "first_ms": FIRST_MS, "last_ms": FIRST_MS + 30_000,
            "series": {"published": [10] * 6, "redelivery_risk": [0] * 5 + [82]}}},
        links=[link(redelivery_risk=82, worst=WORST)],
        inputs=["export-A", "export-B"],
        deliveries="drill/deliveries.jsonl",
        **extra,
    )  # fmt: skip


def test_the_page_opens_with_title_inputs_and_verdict_then_problems_then_inventory():
    html = page()
    order = [
        html.index("<h1>georep reconciliation of A, B, 2026-11-26 05:20 UTC</h1>"),
        html.index("Inputs: <code>export-A</code>, <code>export-B</code>; delivery log"),
        html.index("<ul class='verdict'>"),
        html.index(RISK_MEANING.replace("'", "&#x27;")),
        html.index("<h2>Problems</h2>"),
        html.index("<h2>What was counted</h2>"),
        html.index("Timeline per topic"),
    ]
    assert order == sorted(order)
    assert re.findall(r"<li class='([a-z-]+)' data-link='([^']+)'>", html) == [
        ("at-risk", "A:B"),
        ("fail", "observed"),
    ]
    assert "5 duplicates (0.8% of 600 messages), 0 lost, 12 redelivered" in html
    problems = html[html.index("<h2>Problems</h2>") : html.index("<h2>What was counted")]
    tiles = {key: css for css, key in re.findall(
        r"<div class='total (bad|ok)' data-key='(\w+)'>", problems)}  # fmt: skip
    assert tiles == {
        "replication_gap": "ok", "observed_duplicates": "bad", "observed_losses": "ok",
        "redelivery_risk": "bad", "skip_risk": "ok",
    }  # fmt: skip
    counted = html[html.index("<h2>What was counted</h2>") :]
    assert "data-key='messages'" in counted and "data-key='redelivery_risk'" not in counted
    assert "<th data-column='origin_mdp'>origin mark-delete</th>" in html
    assert "<td class='n bad'>82</td>" in html and "<td class='topic'>" in html


def test_the_failover_is_shaded_on_its_topic_timeline_and_the_axis_stretched():
    assert "class='failover'" not in page()
    shaded = page(failovers={"persistent://geo/ns/orders": (FIRST_MS + 31_000, FIRST_MS + 45_000)})
    assert shaded.count("class='failover'") == 1 and ">failover</text>" in shaded
    assert "2025-11-24 16:00:45.000" in shaded  # the axis ends at the first delivery after
