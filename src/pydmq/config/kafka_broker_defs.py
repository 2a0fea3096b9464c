"""Type, default and run-time changeability of the Kafka broker properties pydmq accepts
without effect (:mod:`pydmq.config.kafka_only` says why each has none).

DescribeConfigs of a BROKER resource lists every broker config Kafka 4.4 lists: pydmq's own
(:data:`pydmq.config.broker.BROKER_CONFIGS`) and these, with the default Kafka 4.4 reports
(DEFAULT_CONFIG) and its config type, ``read_only`` unless Kafka can change it at run time
(its DynamicBrokerConfig set). IncrementalAlterConfigs and AlterConfigs accept those dynamic
ones on a BROKER resource as Kafka does (validated by type), keep them, and report them back;
they change nothing else in pydmq. The table was read off a Kafka 4.4 broker's own
DescribeConfigs answer (names, types and defaults only). Properties Kafka 4.4 no longer lists
(the Kafka 3.x ones) are accepted at start-up but not described, as Kafka does not describe
them. Pure data; parsed once at first use.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass

from pydmq.config.definitions import ConfigType

__all__ = ["KafkaOnlyConfig", "kafka_only_configs"]


@dataclass(frozen=True, slots=True)
class KafkaOnlyConfig:
    """One Kafka broker property without effect in pydmq: as Kafka 4.4 describes it."""

    name: str
    type: ConfigType
    default: str | None
    dynamic: bool

    @property
    def sensitive(self) -> bool:
        return self.type == ConfigType.PASSWORD


# name, type, D (dynamic in Kafka) or S (static only), default (JSON: a string or null).
_TABLE = """
    add.partitions.to.txn.retry.backoff.max.ms INT S "100"
    add.partitions.to.txn.retry.backoff.ms INT S "20"
    alter.config.policy.class.name CLASS S null
    alter.log.dirs.replication.quota.window.num INT S "11"
    alter.log.dirs.replication.quota.window.size.seconds INT S "1"
    authorizer.class.name STRING S ""
    auto.leader.rebalance.enable BOOLEAN S "true"
    background.threads INT D "10"
    client.quota.callback.class CLASS S null
    compression.gzip.level INT D "-1"
    compression.lz4.level INT D "9"
    compression.zstd.level INT D "3"
    config.providers LIST D ""
    connection.failed.authentication.delay.ms INT S "100"
    connections.max.reauth.ms LONG S "0"
    controlled.shutdown.enable BOOLEAN S "true"
    controller.quorum.append.linger.ms INT S "25"
    controller.quorum.auto.join.enable BOOLEAN S "false"
    controller.quorum.bootstrap.servers LIST S ""
    controller.quorum.fetch.max.bytes INT S "1048576"
    controller.quorum.fetch.snapshot.max.bytes INT S "1048576"
    controller.quorum.request.timeout.ms INT S "2000"
    controller.quorum.retry.backoff.ms INT S "20"
    controller.quota.window.num INT S "11"
    controller.quota.window.size.seconds INT S "1"
    controller.socket.timeout.ms INT S "30000"
    cordoned.log.dirs LIST D ""
    create.topic.policy.class.name CLASS S null
    delegation.token.expiry.check.interval.ms LONG S "3600000"
    delegation.token.expiry.time.ms LONG S "86400000"
    delegation.token.max.lifetime.ms LONG S "604800000"
    delegation.token.secret.key PASSWORD S null
    delete.records.purgatory.purge.interval.requests INT S "1"
    early.start.listeners LIST S null
    errors.deadletterqueue.auto.create.topics.enable BOOLEAN D "false"
    errors.deadletterqueue.topic.name.prefix STRING D "dlq."
    fetch.purgatory.purge.interval.requests INT S "1000"
    follower.fetch.last.tiered.offset.enable BOOLEAN D "false"
    group.consumer.assignment.interval.ms INT D "1000"
    group.consumer.max.assignment.interval.ms INT S "15000"
    group.consumer.max.heartbeat.interval.ms INT S "15000"
    group.consumer.max.session.timeout.ms INT S "60000"
    group.consumer.migration.policy STRING S "bidirectional"
    group.consumer.min.assignment.interval.ms INT S "0"
    group.consumer.min.heartbeat.interval.ms INT S "5000"
    group.consumer.min.session.timeout.ms INT S "45000"
    group.coordinator.append.linger.ms INT S "-1"
    group.coordinator.background.threads INT S "2"
    group.coordinator.cached.buffer.max.bytes INT D "1048588"
    group.coordinator.rebalance.protocols LIST S "classic,consumer,streams"
    group.coordinator.threads INT S "4"
    group.share.assignment.interval.ms INT D "1000"
    group.share.assignors LIST S "simple"
    group.share.max.assignment.interval.ms INT S "15000"
    group.share.max.delivery.count.limit INT S "10"
    group.share.max.heartbeat.interval.ms INT S "15000"
    group.share.max.partition.max.record.locks INT S "4000"
    group.share.max.record.lock.duration.ms INT S "60000"
    group.share.max.session.timeout.ms INT S "60000"
    group.share.max.size INT S "200"
    group.share.min.assignment.interval.ms INT S "0"
    group.share.min.delivery.count.limit INT S "2"
    group.share.min.heartbeat.interval.ms INT S "5000"
    group.share.min.partition.max.record.locks INT S "100"
    group.share.min.record.lock.duration.ms INT S "15000"
    group.share.min.session.timeout.ms INT S "45000"
    group.streams.assignment.interval.ms INT D "1000"
    group.streams.assignors LIST S "sticky"
    group.streams.heartbeat.interval.ms INT S "5000"
    group.streams.initial.rebalance.delay.ms INT S "3000"
    group.streams.max.assignment.interval.ms INT S "15000"
    group.streams.max.heartbeat.interval.ms INT S "15000"
    group.streams.max.session.timeout.ms INT S "60000"
    group.streams.max.size INT S "2147483647"
    group.streams.max.standby.replicas INT S "2"
    group.streams.min.assignment.interval.ms INT S "0"
    group.streams.min.heartbeat.interval.ms INT S "5000"
    group.streams.min.session.timeout.ms INT S "45000"
    group.streams.num.standby.replicas INT S "0"
    group.streams.rack.aware.assignment.tags LIST S ""
    group.streams.session.timeout.ms INT S "45000"
    group.streams.topology.description.plugin.class CLASS S null
    initial.broker.registration.timeout.ms INT S "60000"
    kafka.metrics.polling.interval.secs INT S "10"
    kafka.metrics.reporters LIST S ""
    leader.imbalance.check.interval.seconds LONG S "300"
    log.cleaner.io.buffer.load.factor DOUBLE D "0.9"
    log.cleaner.io.buffer.size INT D "524288"
    log.dir.failure.timeout.ms LONG S "30000"
    log.flush.offset.checkpoint.interval.ms INT S "60000"
    log.flush.start.offset.checkpoint.interval.ms INT S "60000"
    log.local.retention.bytes LONG D "-2"
    log.local.retention.ms LONG D "-2"
    log.preallocate BOOLEAN D "false"
    log.remote.copy.lag.bytes LONG D "-1"
    log.remote.copy.lag.ms LONG D "0"
    log.roll.jitter.hours INT S "0"
    log.roll.jitter.ms LONG D null
    max.connection.creation.rate INT D "2147483647"
    max.decompressed.message.bytes INT D "2147483639"
    max.request.partition.size.limit INT S "2000"
    metadata.log.dir STRING S null
    metadata.log.max.record.bytes.between.snapshots LONG S "20971520"
    metadata.log.max.snapshot.interval.ms LONG S "3600000"
    metadata.log.segment.bytes INT S "1073741824"
    metadata.log.segment.ms LONG S "604800000"
    metadata.max.idle.interval.ms INT S "500"
    metadata.max.retention.bytes LONG S "104857600"
    metadata.max.retention.ms LONG S "604800000"
    metric.reporters LIST D "org.apache.kafka.common.metrics.JmxReporter"
    metrics.num.samples INT S "2"
    metrics.recording.level STRING S "INFO"
    metrics.sample.window.ms LONG S "30000"
    num.io.threads INT D "8"
    num.network.threads INT D "3"
    num.recovery.threads.per.data.dir INT D "2"
    num.replica.alter.log.dirs.threads INT S null
    num.replica.fetchers INT D "1"
    offsets.commit.timeout.ms INT S "5000"
    offsets.load.buffer.size INT S "5242880"
    offsets.topic.compression.codec INT S "0"
    offsets.topic.segment.bytes INT S "104857600"
    principal.builder.class CLASS D "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"
    producer.purgatory.purge.interval.requests INT S "1000"
    queued.max.request.bytes LONG S "-1"
    queued.max.requests INT S "500"
    quota.window.num INT S "11"
    quota.window.size.seconds INT S "1"
    remote.fetch.max.wait.ms INT D "500"
    remote.list.offsets.request.timeout.ms LONG D "30000"
    remote.log.index.file.cache.total.size.bytes LONG D "1073741824"
    remote.log.manager.copier.thread.pool.size INT D "10"
    remote.log.manager.copy.max.bytes.per.second LONG D "9223372036854775807"
    remote.log.manager.copy.quota.window.num INT S "11"
    remote.log.manager.copy.quota.window.size.seconds INT S "1"
    remote.log.manager.expiration.thread.pool.size INT D "10"
    remote.log.manager.fetch.max.bytes.per.second LONG D "9223372036854775807"
    remote.log.manager.fetch.quota.window.num INT S "11"
    remote.log.manager.fetch.quota.window.size.seconds INT S "1"
    remote.log.manager.follower.thread.pool.size INT D "2"
    remote.log.manager.task.interval.ms LONG S "30000"
    remote.log.manager.thread.pool.size INT S "2"
    remote.log.metadata.custom.metadata.max.bytes INT S "128"
    remote.log.metadata.manager.class.name STRING S "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager"
    remote.log.metadata.manager.class.path STRING S null
    remote.log.metadata.manager.impl.prefix STRING S "rlmm.config."
    remote.log.metadata.manager.listener.name STRING S null
    remote.log.reader.max.pending.tasks INT S "100"
    remote.log.reader.threads INT D "10"
    remote.log.storage.manager.class.name STRING S null
    remote.log.storage.manager.class.path STRING S null
    remote.log.storage.manager.impl.prefix STRING S "rsm.config."
    remote.log.storage.system.enable BOOLEAN S "false"
    replica.fetch.backoff.ms INT S "1000"
    replica.fetch.min.bytes INT S "1"
    replica.fetch.response.max.bytes INT S "10485760"
    replica.high.watermark.checkpoint.interval.ms LONG S "5000"
    replica.selector.class STRING S null
    replica.socket.receive.buffer.bytes INT S "65536"
    replica.socket.timeout.ms INT S "30000"
    replication.quota.window.num INT S "11"
    replication.quota.window.size.seconds INT S "1"
    request.timeout.ms INT S "30000"
    sasl.client.callback.handler.class CLASS S null
    sasl.enabled.mechanisms LIST D "GSSAPI"
    sasl.jaas.config PASSWORD D null
    sasl.kerberos.kinit.cmd STRING D "/usr/bin/kinit"
    sasl.kerberos.min.time.before.relogin LONG D "60000"
    sasl.kerberos.principal.to.local.rules LIST D "DEFAULT"
    sasl.kerberos.service.name STRING D null
    sasl.kerberos.ticket.renew.jitter DOUBLE D "0.05"
    sasl.kerberos.ticket.renew.window.factor DOUBLE D "0.8"
    sasl.login.callback.handler.class CLASS S null
    sasl.login.class CLASS S null
    sasl.login.connect.timeout.ms INT S null
    sasl.login.read.timeout.ms INT S null
    sasl.login.refresh.buffer.seconds SHORT D "300"
    sasl.login.refresh.min.period.seconds SHORT D "60"
    sasl.login.refresh.window.factor DOUBLE D "0.8"
    sasl.login.refresh.window.jitter DOUBLE D "0.05"
    sasl.login.retry.backoff.max.ms LONG S "10000"
    sasl.login.retry.backoff.ms LONG S "100"
    sasl.mechanism.controller.protocol STRING S "GSSAPI"
    sasl.mechanism.inter.broker.protocol STRING D "GSSAPI"
    sasl.oauthbearer.allow.unverified.audience BOOLEAN S "false"
    sasl.oauthbearer.allow.unverified.issuer BOOLEAN S "false"
    sasl.oauthbearer.assertion.algorithm STRING S "RS256"
    sasl.oauthbearer.assertion.claim.aud STRING S null
    sasl.oauthbearer.assertion.claim.exp.seconds INT S "300"
    sasl.oauthbearer.assertion.claim.iss STRING S null
    sasl.oauthbearer.assertion.claim.jti.include BOOLEAN S "false"
    sasl.oauthbearer.assertion.claim.nbf.seconds INT S "60"
    sasl.oauthbearer.assertion.claim.sub STRING S null
    sasl.oauthbearer.assertion.file STRING S null
    sasl.oauthbearer.assertion.private.key.file STRING S null
    sasl.oauthbearer.assertion.private.key.passphrase PASSWORD S null
    sasl.oauthbearer.assertion.template.file STRING S null
    sasl.oauthbearer.client.credentials.client.id STRING S null
    sasl.oauthbearer.client.credentials.client.secret PASSWORD S null
    sasl.oauthbearer.clock.skew.seconds INT S "30"
    sasl.oauthbearer.expected.audience LIST S ""
    sasl.oauthbearer.expected.issuer STRING S null
    sasl.oauthbearer.jwks.endpoint.refresh.ms LONG S "3600000"
    sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms LONG S "10000"
    sasl.oauthbearer.jwks.endpoint.retry.backoff.ms LONG S "100"
    sasl.oauthbearer.jwks.endpoint.url STRING S null
    sasl.oauthbearer.jwt.retriever.class CLASS S "org.apache.kafka.common.security.oauthbearer.DefaultJwtRetriever"
    sasl.oauthbearer.jwt.validator.class CLASS S "org.apache.kafka.common.security.oauthbearer.DefaultJwtValidator"
    sasl.oauthbearer.scope STRING S null
    sasl.oauthbearer.scope.claim.name STRING S "scope"
    sasl.oauthbearer.sub.claim.name STRING S "sub"
    sasl.oauthbearer.token.endpoint.url STRING S null
    sasl.server.callback.handler.class CLASS S null
    sasl.server.max.receive.size INT S "524288"
    security.inter.broker.protocol STRING S "PLAINTEXT"
    security.providers STRING S null
    share.coordinator.append.linger.ms INT S "-1"
    share.coordinator.cached.buffer.max.bytes INT D "1048588"
    share.coordinator.load.buffer.size INT S "5242880"
    share.coordinator.snapshot.update.records.per.snapshot INT S "500"
    share.coordinator.state.topic.compression.codec INT S "0"
    share.coordinator.state.topic.min.isr SHORT S "2"
    share.coordinator.state.topic.num.partitions INT S "50"
    share.coordinator.state.topic.replication.factor SHORT S "3"
    share.coordinator.state.topic.segment.bytes INT S "104857600"
    share.coordinator.threads INT S "1"
    share.coordinator.write.timeout.ms INT S "5000"
    share.fetch.purgatory.purge.interval.requests INT S "1000"
    socket.connection.setup.timeout.max.ms LONG S "30000"
    socket.connection.setup.timeout.ms LONG S "10000"
    socket.listen.backlog.size INT S "50"
    ssl.allow.dn.changes BOOLEAN S "false"
    ssl.allow.san.changes BOOLEAN S "false"
    ssl.engine.factory.class CLASS D null
    ssl.keymanager.algorithm STRING D "SunX509"
    ssl.provider STRING D null
    ssl.secure.random.implementation STRING D null
    ssl.trustmanager.algorithm STRING D "PKIX"
    telemetry.max.bytes INT S "1048576"
    transaction.abort.timed.out.transaction.cleanup.interval.ms INT S "10000"
    transaction.partition.verification.enable BOOLEAN D "true"
    transaction.remove.expired.transaction.cleanup.interval.ms INT S "3600000"
    transaction.state.log.load.buffer.size INT S "5242880"
    transaction.state.log.min.isr INT S "2"
    transaction.state.log.num.partitions INT S "50"
    transaction.state.log.replication.factor SHORT S "3"
    transaction.state.log.segment.bytes INT S "104857600"
    transaction.two.phase.commit.enable BOOLEAN S "false"
"""


@functools.cache
def kafka_only_configs() -> dict[str, KafkaOnlyConfig]:
    """Every Kafka 4.4 broker property pydmq accepts without effect, by name (sorted)."""
    out: dict[str, KafkaOnlyConfig] = {}
    for line in _TABLE.strip().splitlines():
        name, kind, changeable, default = line.split(maxsplit=3)
        out[name] = KafkaOnlyConfig(name, ConfigType[kind], json.loads(default), changeable == "D")
    return out
