"""Who may do what on a REST: bearer tokens with two roles.

Each route needs a role: ``PUBLIC`` (health, metrics, the OpenAPI document), ``READ``
(every other GET) or ``ADMIN`` (every mutation). With no admin token configured the REST
is open and every request passes. Otherwise:

=====================  ===========  ===========  ===========
request carries        PUBLIC       READ route   ADMIN route
=====================  ===========  ===========  ===========
no / malformed header  pass         401          401
unknown token          pass         401          401
read-only token        pass         pass         403
admin token            pass         pass         pass
=====================  ===========  ===========  ===========

401 means "who are you?" (answered with ``WWW-Authenticate: Bearer``); 403 means "I know
who you are and you may not". Tokens are compared by SHA-256 digest against every
configured token with ``hmac.compare_digest``, so the time taken says nothing about how
much of a token matched or which one did.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
from typing import Protocol

from georep.rest.errors import Forbidden, Unauthorized
from georep.rest.tokens import Token


class Role(enum.Enum):
    PUBLIC = "public"
    READ = "read"
    ADMIN = "admin"


class TokenRoles(Protocol):
    """What a server's settings say about tokens."""

    @property
    def admin_tokens(self) -> frozenset[Token]: ...

    @property
    def read_only_tokens(self) -> frozenset[Token]: ...


def authorize(settings: TokenRoles, authorization: str | None, needed: Role) -> Role | None:
    """The caller's role, or raise Unauthorized / Forbidden. None when the REST is open
    or the route is public and no token was checked."""
    if needed is Role.PUBLIC or not settings.admin_tokens:
        return None
    presented = _bearer(authorization)
    if presented is None:
        raise Unauthorized("this request needs 'Authorization: Bearer <token>'")
    digest = hashlib.sha256(presented.encode()).digest()
    is_admin = _matches(digest, settings.admin_tokens)
    is_reader = _matches(digest, settings.read_only_tokens)
    if is_admin:
        return Role.ADMIN
    if not is_reader:
        raise Unauthorized("the bearer token is not valid")
    if needed is Role.ADMIN:
        raise Forbidden("a read-only token may only read; this request needs an admin token")
    return Role.READ


def _bearer(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, credentials = authorization.strip().partition(" ")
    credentials = credentials.strip()
    if scheme.lower() != "bearer" or not credentials or " " in credentials:
        return None
    return credentials


def _matches(digest: bytes, tokens: frozenset[Token]) -> bool:
    found = False
    for token in tokens:
        found |= hmac.compare_digest(digest, token.digest)
    return found
