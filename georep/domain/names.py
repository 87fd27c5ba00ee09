"""The naming rules, in one place: every name a user gives georep (over the binary
protocol, the admin REST, a gateway's REST or configuration, ``georep up``) is checked
here, and each failure is an :class:`InvalidName` saying which rule it broke.

==================================  =========================================================
name                                rule
==================================  =========================================================
tenant, namespace, cluster          ASCII letters, digits and ``-=:._`` (Pulsar's named-entity
                                    rule), 1..``limits.{tenant,namespace,cluster}_name_chars_max``
topic local name, subscription      printable Unicode, no ``/``, 1..``limits.topic_local_name_
                                    chars_max`` / ``subscription_name_chars_max`` characters
role (a tenant's ``adminRoles``)    printable Unicode, 1..``limits.role_name_chars_max``
every one of them                   not ``.`` or ``..``: a path segment of that name would be
                                    collapsed by HTTP clients and servers, and address
                                    something else
==================================  =========================================================

A *subscription pattern* (a subscription-sync policy's, ``check_subscription_pattern``)
is a regular expression of Python's ``re`` that must match a subscription's whole name
(``re.fullmatch``), as a Java pattern does with ``matches()`` in Pulsar's regex
subscriptions: ``orders-.*`` takes ``orders-eu`` and not ``old-orders-eu``. Printable,
1..``limits.sync_subscription_pattern_chars_max`` characters, and it must compile.

Topic names are Unicode while tenants and namespaces are ASCII, as in Pulsar (whose
``\\w`` is ASCII): a unicode tenant is refused by Pulsar, a unicode topic accepted.
Printable means no control, format or separator characters other than the space (so no
``\\n`` to forge a log line and no NUL).

Example::

    check("tenant", "acme")          -> "acme"
    check("topic", "commandes-été")  -> "commandes-été"
    check("namespace", "..")         -> InvalidName("namespace name '..' is not a name ...")
"""

from __future__ import annotations

import re

from georep import limits


class InvalidName(ValueError):
    """A name breaks one of the rules above; the message says which."""


_ENTITY = re.compile(r"[-=:.\w]+", re.ASCII)
_DOTS = frozenset({".", ".."})

#: kind -> (characters at most, the ASCII named-entity rule?)
_RULES: dict[str, tuple[int, bool]] = {
    "tenant": (limits.tenant_name_chars_max, True),
    "namespace": (limits.namespace_name_chars_max, True),
    "cluster": (limits.cluster_name_chars_max, True),
    "topic": (limits.topic_local_name_chars_max, False),
    "subscription": (limits.subscription_name_chars_max, False),
    "role": (limits.role_name_chars_max, False),
}


def check(kind: str, name: object) -> str:
    """``name`` if it is a valid name of ``kind`` (a key of the table above)."""
    chars_max, entity = _RULES[kind]
    label = "topic local" if kind == "topic" else kind
    if not isinstance(name, str):
        raise InvalidName(f"a {label} name must be a string, got {type(name).__name__}")
    if not name:
        raise InvalidName(f"{label} name is empty")
    if len(name) > chars_max:
        raise InvalidName(f"{label} name has {len(name)} characters; at most {chars_max}")
    if name in _DOTS:
        raise InvalidName(f"{label} name {name!r} is not a name (it is a path step)")
    if entity:
        if not _ENTITY.fullmatch(name):
            raise InvalidName(
                f"{label} name {name!r} may use only letters, digits and -=:._ (ASCII)"
            )
        return name
    if not name.isprintable():
        raise InvalidName(f"{label} name {name!r} has unprintable characters")
    if kind != "role" and "/" in name:
        raise InvalidName(f"{label} name {name!r} may not contain '/'")
    return name


def check_subscription_pattern(text: object) -> re.Pattern[str]:
    """``text`` compiled, if it is a valid subscription pattern (the rule above).

    >>> check_subscription_pattern("orders-.*").fullmatch("orders-eu") is not None
    True
    >>> try:
    ...     check_subscription_pattern("orders-(")
    ... except InvalidName as error:
    ...     print(error)
    subscription pattern 'orders-(' is not a regular expression: missing ), \
unterminated subpattern at position 7
    """
    chars_max = limits.sync_subscription_pattern_chars_max
    if not isinstance(text, str):
        raise InvalidName(f"a subscription pattern must be a string, got {type(text).__name__}")
    if not 0 < len(text) <= chars_max:
        raise InvalidName(f"a subscription pattern has 1..{chars_max} characters, not {len(text)}")
    if not text.isprintable():
        raise InvalidName(f"subscription pattern {text!r} has unprintable characters")
    try:
        return re.compile(text)
    except re.error as error:
        raise InvalidName(
            f"subscription pattern {text!r} is not a regular expression: {error}"
        ) from None
