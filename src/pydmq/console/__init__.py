"""The web console at ``/`` on a node's HTTP listener: read-only, server-rendered HTML pages
(no JavaScript needed) of the cluster, its topics and its consumer groups.

Every figure comes from the REST admin API's resources (:mod:`pydmq.rest`: the Kafka requests
an AdminClient would send, run by the broker's own handlers, with the caller's principal) or
from the node's metrics registry (:mod:`pydmq.metrics.collector`), sampled into a ring buffer
by :mod:`~pydmq.console.sampler` for rates and the lag plot. :mod:`~pydmq.console.html`
escapes and lays out, :mod:`~pydmq.console.svg` draws the lag plot, :mod:`~pydmq.console.pages`
renders the pages and puts their routes together.
"""
