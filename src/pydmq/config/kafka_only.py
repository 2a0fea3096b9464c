"""Kafka broker properties pydmq accepts without effect, grouped by the reason why.

A Kafka ``server.properties`` loads unchanged: the properties pydmq defines
(:mod:`pydmq.config.broker`) are honoured, the Kafka properties listed here are accepted and
named in one start-up warning with their reasons, and any other key is refused with the
closest known name (:func:`unknown_property_message`). The names are those of Apache Kafka
4.4's broker configuration, plus the Kafka 3.x ones that Kafka 4 removed, so that an older
file loads as well. Pure data and functions; no state.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["KAFKA_ONLY", "KafkaOnlyGroup", "kafka_only_reason", "unknown_property_message"]


@dataclass(frozen=True, slots=True)
class KafkaOnlyGroup:
    """Kafka properties without effect in pydmq, for one reason."""

    reason: str
    names: frozenset[str]
    prefixes: tuple[str, ...] = ()

    def covers(self, name: str) -> bool:
        return name in self.names or name.startswith(self.prefixes)


def _group(reason: str, names: str, prefixes: tuple[str, ...] = ()) -> KafkaOnlyGroup:
    return KafkaOnlyGroup(reason, frozenset(names.split()), prefixes)


KAFKA_ONLY: tuple[KafkaOnlyGroup, ...] = (
    _group(
        "thread and pool sizes of Kafka's JVM broker; a pydmq node runs on one asyncio event loop",
        """
        background.threads group.coordinator.background.threads group.coordinator.threads
        num.io.threads num.network.threads num.recovery.threads.per.data.dir
        num.replica.alter.log.dirs.threads num.replica.fetchers
        """,
    ),
    _group(
        "request queueing and purgatory housekeeping of Kafka's request pipeline, which "
        "pydmq does not have",
        """
        queued.max.requests queued.max.request.bytes max.request.partition.size.limit
        fetch.purgatory.purge.interval.requests producer.purgatory.purge.interval.requests
        delete.records.purgatory.purge.interval.requests
        """,
    ),
    _group(
        "timeouts, buffers, intervals, codec levels and switches of Kafka's internals; pydmq "
        "uses fixed values of its own (and always shuts down in a controlled way)",
        """
        controlled.shutdown.enable request.timeout.ms controller.socket.timeout.ms socket.listen.backlog.size
        socket.connection.setup.timeout.ms socket.connection.setup.timeout.max.ms
        replica.socket.timeout.ms replica.socket.receive.buffer.bytes replica.fetch.backoff.ms
        replica.fetch.min.bytes replica.fetch.response.max.bytes
        replica.high.watermark.checkpoint.interval.ms log.flush.offset.checkpoint.interval.ms
        log.flush.start.offset.checkpoint.interval.ms log.initial.task.delay.ms
        log.preallocate log.roll.jitter.ms log.roll.jitter.hours max.decompressed.message.bytes
        producer.id.expiration.check.interval.ms initial.broker.registration.timeout.ms
        server.max.startup.time.ms controller.quorum.append.linger.ms
        controller.quorum.fetch.max.bytes controller.quorum.fetch.snapshot.max.bytes
        controller.quorum.request.timeout.ms controller.quorum.retry.backoff.ms
        controller.performance.always.log.threshold.ms controller.performance.sample.period.ms
        offsets.commit.timeout.ms offsets.load.buffer.size offsets.topic.compression.codec
        group.coordinator.append.linger.ms
        group.coordinator.cached.buffer.max.bytes compression.gzip.level compression.lz4.level
        compression.zstd.level
        """,
    ),
    _group(
        "layout and retention of Kafka's KRaft metadata log; pydmq keeps its metadata log in "
        "log.dirs and snapshots it every metadata.log.max.snapshot.interval.records records",
        """
        metadata.log.dir metadata.log.segment.bytes metadata.log.segment.ms
        metadata.max.retention.bytes metadata.max.retention.ms metadata.max.idle.interval.ms
        metadata.log.max.record.bytes.between.snapshots metadata.log.max.snapshot.interval.ms
        internal.metadata.delete.delay.millis internal.metadata.log.segment.bytes
        internal.metadata.max.batch.size.in.bytes
        """,
    ),
    _group(
        "tuning and bounds of Kafka's group coordinator; pydmq serves the classic and consumer "
        "(KIP-848) protocols with the group.* settings it lists",
        """
        group.coordinator.rebalance.protocols group.consumer.assignment.interval.ms
        group.consumer.min.assignment.interval.ms group.consumer.max.assignment.interval.ms
        group.consumer.assignor.offload.enable group.consumer.migration.policy
        group.consumer.min.session.timeout.ms group.consumer.max.session.timeout.ms
        group.consumer.min.heartbeat.interval.ms group.consumer.max.heartbeat.interval.ms
        group.consumer.regex.refresh.interval.ms
        """,
    ),
    _group(
        "the share group (KIP-932) settings pydmq does not apply, and streams groups (KIP-1071)",
        """
        group.share.assignment.interval.ms group.share.assignor.offload.enable
        group.share.assignors group.share.dlq.manager.class.name
        group.share.initialize.retry.interval.ms group.share.max.assignment.interval.ms
        group.share.max.delivery.count.limit group.share.max.heartbeat.interval.ms
        group.share.max.partition.max.record.locks group.share.max.record.lock.duration.ms
        group.share.max.session.timeout.ms group.share.max.size
        group.share.min.assignment.interval.ms group.share.min.delivery.count.limit
        group.share.min.heartbeat.interval.ms group.share.min.partition.max.record.locks
        group.share.min.record.lock.duration.ms group.share.min.session.timeout.ms
        group.share.persister.class.name share.coordinator.append.linger.ms
        share.coordinator.cached.buffer.max.bytes
        share.coordinator.cold.partition.snapshot.interval.ms share.coordinator.load.buffer.size
        share.coordinator.snapshot.update.records.per.snapshot
        share.coordinator.state.topic.compression.codec
        share.coordinator.state.topic.prune.interval.ms share.coordinator.threads
        share.coordinator.write.timeout.ms share.fetch.purgatory.purge.interval.requests
        errors.deadletterqueue.auto.create.topics.enable errors.deadletterqueue.topic.name.prefix
        group.streams.acceptable.recovery.lag group.streams.assignment.interval.ms
        group.streams.assignor.offload.enable group.streams.assignors
        group.streams.heartbeat.interval.ms group.streams.initial.rebalance.delay.ms
        group.streams.max.assignment.interval.ms group.streams.max.heartbeat.interval.ms
        group.streams.max.session.timeout.ms group.streams.max.size
        group.streams.max.standby.replicas group.streams.max.warmup.replicas
        group.streams.min.assignment.interval.ms group.streams.min.heartbeat.interval.ms
        group.streams.min.session.timeout.ms group.streams.min.task.offset.interval.ms
        group.streams.num.standby.replicas group.streams.num.warmup.replicas
        group.streams.rack.aware.assignment.tags group.streams.session.timeout.ms
        group.streams.task.offset.interval.ms group.streams.topology.description.plugin.class
        """,
    ),
    _group(
        "transaction coordinator tuning pydmq does not have: it replays __transaction_state in "
        "1 MiB reads, verifies a transactional produce's partition with one request per "
        "coordinator at a time rather than on a retry schedule, and has no two-phase commit "
        "(KIP-939)",
        """
        transaction.state.log.load.buffer.size
        transaction.two.phase.commit.enable
        add.partitions.to.txn.retry.backoff.ms add.partitions.to.txn.retry.backoff.max.ms
        """,
    ),
    _group(
        "the log cleaner's I/O buffers: pydmq's cleaner reads segments in 1 MiB reads and fills "
        "its offset map to Kafka's default load factor (0.9)",
        """
        log.cleaner.io.buffer.load.factor log.cleaner.io.buffer.size
        """,
    ),
    _group(
        "tiered storage (KIP-405), which pydmq does not implement",
        """
        remote.log.storage.system.enable remote.log.index.file.cache.total.size.bytes
        remote.log.index.file.cache.ttl.ms remote.log.manager.copier.thread.pool.size
        remote.log.manager.copy.max.bytes.per.second remote.log.manager.copy.quota.window.num
        remote.log.manager.copy.quota.window.size.seconds
        remote.log.manager.expiration.thread.pool.size
        remote.log.manager.fetch.max.bytes.per.second remote.log.manager.fetch.quota.window.num
        remote.log.manager.fetch.quota.window.size.seconds
        remote.log.manager.follower.thread.pool.size remote.log.manager.task.interval.ms
        remote.log.manager.task.retry.backoff.max.ms remote.log.manager.task.retry.backoff.ms
        remote.log.manager.task.retry.jitter remote.log.manager.thread.pool.size
        remote.log.metadata.custom.metadata.max.bytes remote.log.metadata.manager.class.name
        remote.log.metadata.manager.class.path remote.log.metadata.manager.impl.prefix
        remote.log.metadata.manager.listener.name remote.log.reader.max.pending.tasks
        remote.log.reader.threads remote.log.storage.manager.class.name
        remote.log.storage.manager.class.path remote.log.storage.manager.impl.prefix
        remote.fetch.max.wait.ms remote.list.offsets.request.timeout.ms log.local.retention.bytes
        log.local.retention.ms log.remote.copy.lag.bytes log.remote.copy.lag.ms
        follower.fetch.last.tiered.offset.enable
        """,
        ("rsm.config.", "rlmm.config."),
    ),
    _group(
        "security pydmq does not implement yet: GSSAPI (Kerberos), the JVM's SASL login and "
        "callback classes, OAuth token endpoints and delegation tokens",
        """
        principal.builder.class security.inter.broker.protocol security.providers
        delegation.token.expiry.check.interval.ms delegation.token.expiry.time.ms
        delegation.token.max.lifetime.ms delegation.token.secret.key
        sasl.client.callback.handler.class sasl.kerberos.kinit.cmd
        sasl.kerberos.min.time.before.relogin sasl.kerberos.principal.to.local.rules
        sasl.kerberos.service.name sasl.kerberos.ticket.renew.jitter
        sasl.kerberos.ticket.renew.window.factor sasl.login.callback.handler.class
        sasl.login.class sasl.login.connect.timeout.ms sasl.login.read.timeout.ms
        sasl.login.refresh.buffer.seconds sasl.login.refresh.min.period.seconds
        sasl.login.refresh.window.factor sasl.login.refresh.window.jitter
        sasl.login.retry.backoff.max.ms sasl.login.retry.backoff.ms
        sasl.oauthbearer.allow.unverified.audience
        sasl.oauthbearer.allow.unverified.issuer sasl.oauthbearer.assertion.algorithm
        sasl.oauthbearer.assertion.claim.aud
        sasl.oauthbearer.assertion.claim.exp.seconds
        sasl.oauthbearer.assertion.claim.iss
        sasl.oauthbearer.assertion.claim.jti.include
        sasl.oauthbearer.assertion.claim.nbf.seconds
        sasl.oauthbearer.assertion.claim.sub sasl.oauthbearer.assertion.file
        sasl.oauthbearer.assertion.private.key.file
        sasl.oauthbearer.assertion.private.key.passphrase
        sasl.oauthbearer.assertion.template.file
        sasl.oauthbearer.client.credentials.client.id
        sasl.oauthbearer.client.credentials.client.secret
        sasl.oauthbearer.clock.skew.seconds sasl.oauthbearer.expected.audience
        sasl.oauthbearer.expected.issuer sasl.oauthbearer.jwks.endpoint.refresh.ms
        sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms
        sasl.oauthbearer.jwks.endpoint.retry.backoff.ms
        sasl.oauthbearer.jwks.endpoint.url sasl.oauthbearer.jwt.retriever.class
        sasl.oauthbearer.jwt.validator.class sasl.oauthbearer.scope
        sasl.oauthbearer.scope.claim.name sasl.oauthbearer.sub.claim.name
        sasl.oauthbearer.token.endpoint.url sasl.server.callback.handler.class
""",
        ("listener.name.",),
    ),
    _group(
        "Java TLS provider settings (pydmq's TLS is Python's ssl module over OpenSSL) and "
        "certificate reload checks (pydmq reads its key store at start-up only)",
        """
        ssl.allow.dn.changes ssl.allow.san.changes ssl.engine.factory.class
        ssl.keymanager.algorithm ssl.provider ssl.secure.random.implementation
        ssl.trustmanager.algorithm
        """,
    ),
    _group(
        "replication throttles and static quota defaults, which pydmq does not enforce "
        "(client quotas are metadata: AlterClientQuotas)",
        """
        replication.quota.window.num replication.quota.window.size.seconds
        alter.log.dirs.replication.quota.window.num
        alter.log.dirs.replication.quota.window.size.seconds client.quota.callback.class
        leader.replication.throttled.rate follower.replication.throttled.rate
        replica.alter.log.dirs.io.max.bytes.per.second quota.consumer.default
        quota.producer.default
        """,
    ),
    _group(
        "Java plug-in classes, metrics reporters and config providers of the JVM broker "
        "(pydmq's extension points are pluggy hooks)",
        """
        alter.config.policy.class.name create.topic.policy.class.name replica.selector.class
        config.providers metric.reporters kafka.metrics.reporters
        kafka.metrics.polling.interval.secs metrics.num.samples metrics.recording.level
        metrics.sample.window.ms telemetry.max.bytes auto.include.jmx.reporter
        """,
        ("config.providers.",),
    ),
    _group(
        "features pydmq does not have (automatic preferred-leader rebalancing, where "
        "ElectLeaders does it on request; joining a dynamic quorum, KIP-853; JBOD "
        "log-directory handling; early-start listeners; unstable API versions)",
        """
        auto.leader.rebalance.enable leader.imbalance.check.interval.seconds
        unclean.leader.election.interval.ms controller.quorum.auto.join.enable
        cordoned.log.dirs log.dir.failure.timeout.ms early.start.listeners
        unstable.api.versions.enable unstable.feature.versions.enable
        """,
    ),
    _group(
        "pydmq's controller quorum is static (controller.quorum.voters); a node whose "
        "bootstrap server is its own controller listener runs as a single node",
        "controller.quorum.bootstrap.servers",
    ),
    _group(
        "Kafka 3.x settings that Kafka 4 removed (ZooKeeper mode, message format versions)",
        """
        broker.id.generation.enable reserved.broker.max.id
        inter.broker.protocol.version log.message.format.version
        log.message.downconversion.enable log.message.timestamp.difference.max.ms
        offsets.commit.required.acks controlled.shutdown.max.retries
        controlled.shutdown.retry.backoff.ms leader.imbalance.per.broker.percentage
        delegation.token.master.key password.encoder.secret password.encoder.old.secret
        password.encoder.keyfactory.algorithm password.encoder.cipher.algorithm
        password.encoder.key.length password.encoder.iterations
        """,
        ("zookeeper.",),
    ),
)


def kafka_only_reason(name: str) -> str | None:
    """Why the Kafka property ``name`` has no effect in pydmq; None if it is not one."""
    return next((g.reason for g in KAFKA_ONLY if g.covers(name)), None)


def unknown_property_message(name: str, known: Iterable[str]) -> str:
    """The refusal of ``name``, which is neither in ``known`` nor a Kafka property."""
    import difflib  # only on this error path: not at every start-up

    candidates = {*known, *(n for g in KAFKA_ONLY for n in g.names)}
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.75)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return (
        f"unknown broker property {name!r}{hint} (neither a pydmq nor a Kafka broker property; "
        "`pydmq config list` shows them)"
    )
