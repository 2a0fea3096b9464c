"""``BrokerContext``: the request context the broker's handlers take, whose host is the
handlers' ports (:class:`~pydmq.broker.services.BrokerServices`), never the node itself.

:class:`~pydmq.api.handler.RequestContext` names no role; this alias gives the broker's
handlers a fully typed ``ctx.broker`` without the request layer importing the broker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

from pydmq.api.handler import RequestContext

if TYPE_CHECKING:
    from pydmq.broker.services import BrokerServices

__all__ = ["BrokerContext"]

BrokerContext: TypeAlias = RequestContext["BrokerServices"]
