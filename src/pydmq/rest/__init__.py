"""The REST admin API under ``/v1/admin`` (topics, consumer groups, the cluster), served on
the node's HTTP listener.

It changes and reads the cluster only through the Kafka requests a Kafka AdminClient would
send, run by this broker's own handlers (:mod:`pydmq.rest.calls`), so validation,
authorization, forwarding to the controller and the coordinators' rules are Kafka's and are
never written twice. :mod:`~pydmq.rest.errors` maps Kafka error codes to the error envelope,
:mod:`~pydmq.rest.idempotency` replays writes sent again with the same ``Idempotency-Key``,
:mod:`~pydmq.rest.topics`, :mod:`~pydmq.rest.groups` and :mod:`~pydmq.rest.cluster` are the
resources, :mod:`~pydmq.rest.api` puts their routes (and their OpenAPI descriptions) together.
"""
