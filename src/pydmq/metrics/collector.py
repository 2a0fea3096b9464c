"""NodeCollector: a node's metrics in the Prometheus format, read at scrape time.

Nothing here runs on the Kafka path: the broker keeps plain counters (per topic:
:class:`~pydmq.replication.stats.BrokerTopicStats`; per API key:
:class:`~pydmq.api.request_metrics.RequestMetrics`; the controller's commit latency; the
log cleaner's totals) and the state it already has (partitions, ISRs, groups, offsets, fetch
sessions); :meth:`NodeCollector.collect` turns them into metric families when ``/metrics`` is
scraped, on the node's event loop. Each node has its own registry (:func:`node_registry`), so
several embedded nodes in one process never mix. Names and their Kafka equivalents:
docs/METRICS.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from pydmq.api.request_metrics import BUCKETS, ApiRequestMetrics, LatencyHistogram
from pydmq.metrics.loop_lag import EventLoopLagProbe
from pydmq.metrics.source import NodeView
from pydmq.protocol.messages import API_SCHEMAS
from pydmq.storage.api import TopicPartition
from pydmq.storage.errors import KafkaStorageError

if TYPE_CHECKING:
    from pydmq.broker.server import Broker
    from pydmq.controller.runtime import ControllerRuntime

__all__ = ["NodeCollector", "node_registry", "render"]

_BOUNDS = [repr(b) for b in BUCKETS] + ["+Inf"]


def node_registry(node: NodeView, lag: EventLoopLagProbe) -> CollectorRegistry:
    """A registry of this node's own (never prometheus_client's global one)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(NodeCollector(node, lag))
    return registry


class _Snapshot(Collector):
    """Metric families already collected (formatted away from the loop that read them)."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterable[Metric]:
        return self.families


def render(families: list[Metric]) -> bytes:
    """The Prometheus text format of ``families`` (any thread: touches nothing of the node)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshot(families))
    return generate_latest(registry)


def _buckets(histogram: LatencyHistogram) -> list[tuple[str, float]]:
    out: list[tuple[str, float]] = []
    running = 0
    for bound, count in zip(_BOUNDS, histogram.counts, strict=True):
        running += count
        out.append((bound, running))
    return out


def _api_name(api_key: int) -> str:
    """Kafka's name of the API (``list_offsets`` -> ``ListOffsets``)."""
    schema = API_SCHEMAS.get(api_key)
    if schema is None:
        return str(api_key)
    return "".join(part.capitalize() for part in schema.name.split("_"))


class NodeCollector(Collector):
    """Reads one node at each scrape (see the module docstring). Called by the registry on
    the node's event loop (the ``/metrics`` handler)."""

    def __init__(self, node: NodeView, lag: EventLoopLagProbe) -> None:
        self.node = node
        self.lag = lag

    def collect(self) -> Iterable[Metric]:
        node = self.node
        info = GaugeMetricFamily(
            "pydmq_node_info",
            "This node: its id, cluster id and roles.",
            labels=["node_id", "cluster_id", "roles"],
        )
        info.add_metric(
            [str(node.node_id), node.cluster_id, ",".join(sorted(node.config.process_roles))], 1
        )
        yield info
        yield from self._requests()
        yield from self._event_loop()
        broker = node.broker
        if broker is not None:
            yield from self._topics(broker)
            yield from self._partitions(broker)
            yield from self._groups(broker)
            yield from self._fetch_sessions(broker)
            yield from self._cleaner(broker)
        yield from self._controller(broker, node.controller)

    # -- requests ------------------------------------------------------------------------
    def _requests(self) -> Iterator[Metric]:
        merged: dict[int, list[ApiRequestMetrics]] = {}
        node = self.node
        dispatchers = [node.controller_dispatcher]
        if node.broker is not None:
            dispatchers += [node.broker.dispatcher, node.broker.control_plane_dispatcher]
        for dispatcher in dispatchers:
            if dispatcher is None:
                continue
            for api_key, metrics in dispatcher.request_metrics.by_api.items():
                merged.setdefault(api_key, []).append(metrics)
        requests = CounterMetricFamily(
            "pydmq_requests", "Requests answered, per API (Kafka's RequestsPerSec).", labels=["api"]
        )
        total = HistogramMetricFamily(
            "pydmq_request_duration_seconds",
            "Time from a request's arrival to its encoded answer, per API (Kafka's TotalTimeMs).",
            labels=["api"],
        )
        phases = HistogramMetricFamily(
            "pydmq_request_phase_duration_seconds",
            "A request's time per phase: queue (waiting behind an earlier request of its "
            "connection), local (handling and encoding), remote (waiting for replicas, a long "
            "poll or the controller); Kafka's RequestQueueTimeMs, LocalTimeMs, RemoteTimeMs.",
            labels=["api", "phase"],
        )
        for api_key in sorted(merged):
            name = _api_name(api_key)
            parts = merged[api_key]
            whole = _merge(m.total for m in parts)
            requests.add_metric([name], whole.count)
            total.add_metric([name], _buckets(whole), whole.sum)
            for phase in ("queue", "local", "remote"):
                histogram = _merge(getattr(m, phase) for m in parts)
                phases.add_metric([name, phase], _buckets(histogram), histogram.sum)
        yield requests
        yield total
        yield phases

    def _event_loop(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "pydmq_event_loop_lag_seconds",
            "How late the event loop ran the lag probe's last timer.",
            value=self.lag.last_lag,
        )
        lags = HistogramMetricFamily(
            "pydmq_event_loop_lag_probe_seconds",
            f"How late the event loop ran each of the lag probe's timers (one every "
            f"{self.lag.interval:g} s).",
        )
        lags.add_metric([], _buckets(self.lag.lags), self.lag.lags.sum)
        yield lags

    # -- topics and partitions -----------------------------------------------------------
    def _topics(self, broker: Broker) -> Iterator[Metric]:
        stats = broker.replica_manager.topic_stats
        families = {
            "messages_in": CounterMetricFamily(
                "pydmq_broker_messages_in",
                "Records appended as leader, per topic (Kafka's MessagesInPerSec).",
                labels=["topic"],
            ),
            "bytes_in": CounterMetricFamily(
                "pydmq_broker_bytes_in",
                "Record batch bytes appended as leader, per topic (Kafka's BytesInPerSec).",
                labels=["topic"],
            ),
            "bytes_out": CounterMetricFamily(
                "pydmq_broker_bytes_out",
                "Record bytes answered to consumers' fetches, per topic (Kafka's BytesOutPerSec).",
                labels=["topic"],
            ),
            "replication_bytes_out": CounterMetricFamily(
                "pydmq_broker_replication_bytes_out",
                "Record bytes answered to followers' fetches, per topic (Kafka's "
                "ReplicationBytesOutPerSec).",
                labels=["topic"],
            ),
        }
        for topic in sorted(stats.topics):
            if broker.topics.get(topic) is None:
                continue  # deleted: its counters are gone with it
            counters = stats.topics[topic]
            for attribute, family in families.items():
                family.add_metric([topic], getattr(counters, attribute))
        yield from families.values()
        yield CounterMetricFamily(
            "pydmq_replica_isr_shrinks",
            "ISR changes committed that removed replicas from partitions led here (Kafka's "
            "IsrShrinksPerSec).",
            value=stats.isr_shrinks,
        )
        yield CounterMetricFamily(
            "pydmq_replica_isr_expands",
            "ISR changes committed that added replicas to partitions led here (Kafka's "
            "IsrExpandsPerSec).",
            value=stats.isr_expands,
        )

    def _partitions(self, broker: Broker) -> Iterator[Metric]:
        size = GaugeMetricFamily(
            "pydmq_log_size_bytes",
            "Bytes of a partition's log on this node (Kafka's Log Size).",
            labels=["topic", "partition"],
        )
        end = GaugeMetricFamily(
            "pydmq_log_end_offset",
            "A partition's log end offset on this node (Kafka's LogEndOffset).",
            labels=["topic", "partition"],
        )
        leaders = under_replicated = under_min_isr = hosted = 0
        for tp, partition in sorted(broker.replica_manager.partitions.items()):
            hosted += 1
            labels = [tp.topic, str(tp.partition)]
            log = partition.log
            try:
                size.add_metric(labels, log.engine_log.size_in_bytes)
                end.add_metric(labels, log.log_end_offset)
            except (OSError, KafkaStorageError):  # an offline log dir: no figure for it
                pass
            if partition.is_leader:
                leaders += 1
                if len(partition.isr) < len(partition.replicas):
                    under_replicated += 1
                if len(partition.isr) < partition.effective_min_insync_replicas:
                    under_min_isr += 1
        yield size
        yield end
        yield GaugeMetricFamily(
            "pydmq_replica_partitions",
            "Partitions hosted on this node (Kafka's PartitionCount).",
            value=hosted,
        )
        yield GaugeMetricFamily(
            "pydmq_replica_leader_partitions",
            "Partitions this node leads (Kafka's LeaderCount).",
            value=leaders,
        )
        yield GaugeMetricFamily(
            "pydmq_replica_under_replicated_partitions",
            "Partitions led here whose ISR is smaller than their replica set (Kafka's "
            "UnderReplicatedPartitions).",
            value=under_replicated,
        )
        yield GaugeMetricFamily(
            "pydmq_replica_under_min_isr_partitions",
            "Partitions led here whose ISR is below min.insync.replicas (Kafka's "
            "UnderMinIsrPartitionCount).",
            value=under_min_isr,
        )

    def _fetch_sessions(self, broker: Broker) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "pydmq_fetch_session_cache_sessions",
            "Incremental fetch sessions cached (Kafka's NumIncrementalFetchSessions).",
            value=len(broker.fetch_sessions),
        )

    # -- groups --------------------------------------------------------------------------
    def _groups(self, broker: Broker) -> Iterator[Metric]:
        coordinator = broker.group_coordinator
        by_state: dict[tuple[str, str], int] = {}
        group_ids: list[str] = []
        for group_id, _protocol, state, group_type in coordinator.list_groups_with_type():
            key = (state, group_type)
            by_state[key] = by_state.get(key, 0) + 1
            group_ids.append(group_id)
        groups = GaugeMetricFamily(
            "pydmq_groups",
            "Groups coordinated here by state and type (Kafka's NumGroupsStable, "
            "NumGroupsEmpty, ... of the group coordinator).",
            labels=["state", "type"],
        )
        for (state, group_type), count in sorted(by_state.items()):
            groups.add_metric([state, group_type], count)
        yield groups
        lag = GaugeMetricFamily(
            "pydmq_consumer_group_lag",
            "High watermark minus the group's committed offset, per partition with a committed "
            "offset that this node leads (what kafka-consumer-groups --describe shows as LAG).",
            labels=["group", "topic", "partition"],
        )
        partitions = broker.replica_manager.partitions
        for group_id in sorted(group_ids):
            for (topic, index), committed in sorted(coordinator.offsets.all(group_id).items()):
                partition = partitions.get(TopicPartition(topic, index))
                if partition is None or not partition.is_leader:
                    continue
                lag.add_metric(
                    [group_id, topic, str(index)],
                    max(0, partition.high_watermark - committed.offset),
                )
        yield lag

    # -- log cleaner ---------------------------------------------------------------------
    def _cleaner(self, broker: Broker) -> Iterator[Metric]:
        cleaner = broker.log_cleaner
        if cleaner is None:
            return
        yield CounterMetricFamily(
            "pydmq_log_cleaner_bytes_read",
            "Bytes the log cleaner read from compacted logs (Kafka's cleaner bytes read).",
            value=cleaner.bytes_read,
        )
        yield CounterMetricFamily(
            "pydmq_log_cleaner_bytes_written",
            "Bytes the log cleaner wrote back (Kafka's cleaner bytes written).",
            value=cleaner.bytes_written,
        )
        yield CounterMetricFamily(
            "pydmq_log_cleaner_cleanings",
            "Cleanings completed.",
            value=cleaner.cleanings,
        )
        yield CounterMetricFamily(
            "pydmq_log_cleaner_clean_seconds",
            "Time spent cleaning.",
            value=cleaner.clean_seconds,
        )
        yield GaugeMetricFamily(
            "pydmq_log_cleaner_last_clean_seconds",
            "Duration of the last cleaning (Kafka's max-clean-time-secs, for the last one).",
            value=cleaner.last_clean_seconds,
        )
        yield GaugeMetricFamily(
            "pydmq_log_cleaner_dirty_ratio",
            "Dirty ratio of the last log cleaned when it was picked (Kafka's "
            "max-dirty-percent, as a ratio).",
            value=cleaner.last_dirty_ratio,
        )

    # -- controller ----------------------------------------------------------------------
    def _controller(
        self, broker: Broker | None, controller: ControllerRuntime | None
    ) -> Iterator[Metric]:
        if controller is None:
            active = 1 if broker is not None and broker.local_controller is not None else 0
        else:
            active = 1 if controller.is_active else 0
        yield GaugeMetricFamily(
            "pydmq_controller_active",
            "1 on the active controller (a single node is its own), else 0 (Kafka's "
            "ActiveControllerCount).",
            value=active,
        )
        offline = 0
        if controller is not None and controller.is_active:
            for topic in controller.image.topics.by_id.values():
                offline += sum(1 for p in topic.partitions.values() if not p.has_leader)
        elif controller is None and broker is not None:
            manager = broker.replica_manager
            if manager.offline_log_dirs:
                offline = len(manager.partitions)
        yield GaugeMetricFamily(
            "pydmq_controller_offline_partitions",
            "Partitions without a leader, as the active controller sees them; a single node "
            "counts its partitions when its log dir is offline (Kafka's "
            "OfflinePartitionsCount).",
            value=offline,
        )
        if controller is None:
            return
        latency = HistogramMetricFamily(
            "pydmq_raft_commit_latency_seconds",
            "Time from appending an operation's records to the metadata log to applying them "
            "once committed, on the active controller (Kafka's commit-latency-avg/max).",
        )
        latency.add_metric([], _buckets(controller.commit_latency), controller.commit_latency.sum)
        yield latency
        lag = GaugeMetricFamily(
            "pydmq_raft_follower_lag_records",
            "Records of the metadata log a voter is behind the leader's log end, as the leader "
            "saw it at its last fetch (reported by the Raft leader only).",
            labels=["voter"],
        )
        try:
            quorum = controller.driver.describe_quorum()
        except RuntimeError:  # not started
            quorum = None
        if quorum is not None and quorum.ok:
            leader_end = max((v.log_end_offset for v in quorum.current_voters), default=0)
            for voter in quorum.current_voters:
                if voter.replica_id != quorum.leader_id:
                    behind = (
                        leader_end - voter.log_end_offset
                        if voter.log_end_offset >= 0
                        else leader_end
                    )
                    lag.add_metric([str(voter.replica_id)], behind)
        yield lag


def _merge(histograms: Iterable[LatencyHistogram]) -> LatencyHistogram:
    merged = LatencyHistogram()
    for histogram in histograms:
        merged.counts = [a + b for a, b in zip(merged.counts, histogram.counts, strict=True)]
        merged.sum += histogram.sum
    return merged
