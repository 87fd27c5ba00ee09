"""Which dispatcher serves a subscription type.

Kept apart from ``dispatcher.py``, which every kind's module imports: the topic hands
:func:`new_dispatcher` to each subscription it makes (``Subscription(dispatcher_factory=)``),
so neither the subscription nor the dispatchers import the kinds.
"""

from __future__ import annotations

from georep.broker.consumer import SubType
from georep.broker.dispatcher import Dispatcher, DispatcherSubscription
from georep.broker.key_shared_dispatcher import KeySharedDispatcher
from georep.broker.shared_dispatcher import SharedDispatcher
from georep.broker.single_active_dispatcher import SingleActiveConsumerDispatcher
from georep.invariant import invariant


def new_dispatcher(subscription: DispatcherSubscription, sub_type: int) -> Dispatcher:
    """Exclusive and Failover: single active consumer; Shared; Key_Shared."""
    if sub_type in (SubType.EXCLUSIVE, SubType.FAILOVER):
        return SingleActiveConsumerDispatcher(subscription, sub_type)
    if sub_type == SubType.SHARED:
        return SharedDispatcher(subscription)
    invariant(sub_type == SubType.KEY_SHARED, f"unknown subscription type {sub_type}")
    return KeySharedDispatcher(subscription)
