"""pydmq's HTTP/1.1 listener: a small asyncio server over h11's sans-IO parser.

:mod:`~pydmq.http.messages` the request and response values and the JSON error envelope,
:mod:`~pydmq.http.routing` the routes (path templates, methods, a group per route for the
per-client gates), :mod:`~pydmq.http.server` the listener (keep-alive, bounded head and body,
time limits). It knows nothing of Kafka: the node gives it its routes (:mod:`pydmq.metrics`).
"""
