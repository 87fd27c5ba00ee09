"""The naming rules (georep/domain/names.py), table-driven: what each kind of name accepts and
what it refuses, with the rule named in the error."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from georep import limits
from georep.domain.names import InvalidName, check
from georep.domain.topic_name import InvalidTopicName, TopicName

KINDS = ("tenant", "namespace", "cluster", "topic", "subscription", "role")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", [".", ".."])
def test_path_steps_are_never_names(kind, name) -> None:
    with pytest.raises(InvalidName, match="path step"):
        check(kind, name)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", ["a\nb", "nul\x00", "tab\there", "bidi\u202e", ""])
def test_unprintable_and_empty_names_are_refused(kind, name) -> None:
    with pytest.raises(InvalidName):
        check(kind, name)


@pytest.mark.parametrize(
    ("kind", "name", "accepted"),
    [
        ("tenant", "acme-1.eu:x=y_z", True),
        ("tenant", "été", False),  # ASCII, as Pulsar's named-entity rule
        ("namespace", "a b", False),
        ("cluster", "A", True),
        ("cluster", "a/b", False),
        ("topic", "commandes-été", True),  # topics are Unicode, as in Pulsar
        ("topic", "a b", True),
        ("topic", "a/b", False),
        ("topic", "...", True),  # only . and .. are path steps
        ("subscription", "sub.1", True),
        ("subscription", "s/1", False),
        ("role", "ops/admins", True),
    ],
)
def test_the_rules(kind, name, accepted) -> None:
    if accepted:
        assert check(kind, name) == name
    else:
        with pytest.raises(InvalidName):
            check(kind, name)


def test_lengths() -> None:
    check("tenant", "t" * limits.tenant_name_chars_max)
    with pytest.raises(InvalidName, match="at most"):
        check("tenant", "t" * (limits.tenant_name_chars_max + 1))


@pytest.mark.parametrize(
    "text",
    ["persistent://../default/t", "persistent://public/./t", "persistent://public/default/..",
     "persistent://public/default/a\nb"],
)  # fmt: skip
def test_topic_names_follow_the_same_rules(text) -> None:
    with pytest.raises(InvalidTopicName):
        TopicName.parse(text)


@given(st.text(max_size=40))
def test_an_accepted_name_cannot_change_a_path(name) -> None:
    for kind in KINDS:
        try:
            check(kind, name)
        except InvalidName:
            continue
        assert name not in (".", "..") and name.isprintable()
        if kind != "role":
            assert "/" not in name
