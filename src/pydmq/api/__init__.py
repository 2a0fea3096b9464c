"""The request layer both node roles sit on: what a handler is and how a frame reaches one.

- :mod:`pydmq.api.handler`: :class:`~pydmq.api.handler.ApiHandlerSpec` (an API key, its
  version range and the callable serving it), :class:`~pydmq.api.handler.RequestContext`
  (who sent a request, and the host object handlers work on), ``RawResponse``;
- :mod:`pydmq.api.dispatcher`: :class:`~pydmq.api.dispatcher.RequestDispatcher`, frame in,
  encoded response buffers out, with Kafka's rules for unknown keys and versions.

Neither the broker nor the controller role is named here: the host a handler sees in its
context is a type parameter (the broker's handlers see a ``Broker``, the controller's see
nothing they use), so ``broker/`` and ``controller/`` both import this package and it
imports neither.
"""
