"""The one retry delay of subscription sync's long-lived loops (a topic's sync, a
namespace's side channel and change watch): ``limits.sync_retry_s_initial``, doubling
to ``limits.sync_retry_s_max``, each wait drawn from its upper half so that thousands
of syncs failing together do not retry together."""

from __future__ import annotations

import asyncio
import random

from georep import limits


class Backoff:
    def __init__(self) -> None:
        self._delay_s = limits.sync_retry_s_initial

    def reset(self) -> None:
        """It worked: the next failure waits the initial delay again."""
        self._delay_s = limits.sync_retry_s_initial

    async def wait(self) -> None:
        await asyncio.sleep(self._delay_s * random.uniform(0.5, 1.0))
        self._delay_s = min(self._delay_s * 2, limits.sync_retry_s_max)
