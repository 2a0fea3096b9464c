"""A node's observability over HTTP: Prometheus ``/metrics`` and the health endpoints.

:mod:`~pydmq.metrics.service` (the node's HTTP routes and server, started by the node once its
Kafka listeners serve), :mod:`~pydmq.metrics.collector` (a prometheus_client Collector that
reads the counters the broker keeps, at scrape time; one registry per node, never the
process-global one), :mod:`~pydmq.metrics.health` (liveness and readiness),
:mod:`~pydmq.metrics.loop_lag` (the event loop's lag probe), :mod:`~pydmq.metrics.source`
(what these read of a node). Every metric, with its Kafka equivalent: docs/METRICS.md.
"""
