"""DescribeConfigs (key 32), v1-v4.

Resource types:

- TOPIC (2): every topic config (``TopicConfig.definitions()``) with its effective value and
  source: DYNAMIC_TOPIC_CONFIG when set on the topic, STATIC_BROKER_CONFIG when a broker
  property it defaults from is set in the broker's configuration, else DEFAULT_CONFIG. With
  ``include_synonyms`` the synonyms are, as in Kafka, the topic value (if set), then the broker
  properties it defaults from that are set (STATIC_BROKER_CONFIG), then those with a default
  (DEFAULT_CONFIG), e.g. retention.ms -> log.retention.ms, .minutes, .hours; broker
  properties set at run time come first (dynamic broker, then dynamic default). Unknown topic ->
  UNKNOWN_TOPIC_OR_PARTITION; an illegal name -> INVALID_TOPIC_EXCEPTION.
- BROKER (4): name = this node's id -> every broker config Kafka 4.4 lists: pydmq's own
  (``BROKER_CONFIGS``, value as effective) and the Kafka ones pydmq accepts without effect
  (:mod:`pydmq.config.kafka_broker_defs`, with Kafka's defaults and types), then custom keys
  set dynamically (value hidden, as Kafka). Source and synonyms in Kafka's order: this node's
  dynamic config (DYNAMIC_BROKER_CONFIG), the cluster-wide dynamic default
  (DYNAMIC_DEFAULT_BROKER_CONFIG), the static file (STATIC_BROKER_CONFIG), the default;
  ``read_only`` unless it can change at run time; null values for sensitive ones. Name "" =
  the cluster-wide dynamic defaults that are set. Any other name -> INVALID_REQUEST (Kafka:
  "Unexpected broker id"). The dynamic layers are the node's copy of the controller's
  ConfigRecords (single node: its local metadata log; cluster: UpdateMetadata), so every
  broker of a cluster shows the cluster default and its own layer.
- BROKER_LOGGER (8): name must be this node's id (else INVALID_REQUEST); returns the effective
  levels, by Kafka's names, of the Python loggers "root" and those under "pydmq"
  (DYNAMIC_BROKER_LOGGER_CONFIG source; :mod:`pydmq.config.log_levels`).
- GROUP (32, Kafka 4.x's GroupConfig): any group id (the group need not exist) -> every
  group config (:mod:`pydmq.config.group_configs`): DYNAMIC_GROUP_CONFIG when the group sets
  it, else DEFAULT_CONFIG with the broker property it defaults from (or Kafka's default).
- Anything else -> INVALID_REQUEST ("Unsupported resource type").

``configuration_keys`` null or empty = all configs, else only the named ones (unknown names are
left out, as Kafka does). Version notes: v1 adds synonyms (``include_synonyms``); v3 adds
``config_type`` and ``documentation`` (only when ``include_documentation``); v4 is flexible.

A resource named more than once in one request gets INVALID_REQUEST at every occurrence (as
Kafka answers duplicates in CreateTopics and ListOffsets): one BROKER resource of 8 bytes
answers 72 configs with their synonyms, so repeating it would make a small request cost
megabytes of response. Many resources (up to the decode budget, 110,000) are described in
slices (:mod:`pydmq.broker.handlers._slices`), each resource weighing the configs it returns.

Authorization (as Kafka): DESCRIBE_CONFIGS on the topic, on the group for a GROUP resource
(else GROUP_AUTHORIZATION_FAILED), or on the cluster for a BROKER or
BROKER_LOGGER resource, else TOPIC_AUTHORIZATION_FAILED / CLUSTER_AUTHORIZATION_FAILED for
that resource.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Iterable, Iterator

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import config_resource_refusal
from pydmq.broker.handlers._slices import in_slices
from pydmq.config.broker import BROKER_CONFIGS, BrokerConfig
from pydmq.config.definitions import ConfigDef, ConfigType
from pydmq.config.group_configs import GROUP_CONFIGS, effective_group_configs
from pydmq.config.kafka_broker_defs import KafkaOnlyConfig, kafka_only_configs
from pydmq.config.log_levels import broker_loggers, kafka_level
from pydmq.config.sources import CONFIG_SOURCES
from pydmq.config.topic import TOPIC_DEFAULT_SYNONYMS, TopicConfig, broker_synonyms
from pydmq.protocol.acl import AclOperation
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)
from pydmq.protocol.topic_names import topic_name_problem

__all__ = ["HANDLER", "RESOURCE_TYPES"]

RESOURCE_TYPES = {
    "UNKNOWN": 0,
    "ANY": 1,
    "TOPIC": 2,
    "GROUP": 3,
    "BROKER": 4,
    "BROKER_LOGGER": 8,
    "CLIENT_METRICS": 16,
}
_TOPIC = RESOURCE_TYPES["TOPIC"]
_BROKER = RESOURCE_TYPES["BROKER"]
_BROKER_LOGGER = RESOURCE_TYPES["BROKER_LOGGER"]
_GROUP = 32  # Kafka's ConfigResource.Type GROUP (the "GROUP" above is the ACL type's id)
_BROKER_DEFS = {d.name: d for d in BROKER_CONFIGS}
_SOURCE_NAMES = {code: name for name, code in CONFIG_SOURCES.items()}
_UNKNOWN_TYPE = 0  # Kafka's ConfigType UNKNOWN: a custom key


class _ResourceError(Exception):
    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


def _broker_synonyms(
    broker: BrokerConfig, names: Iterable[str], sensitive: bool
) -> list[DescribeConfigsSynonym]:
    """Kafka's order: this node's dynamic configs, the cluster-wide dynamic defaults, the
    static (set) ones, then every one with a default."""
    names = list(names)
    found: list[DescribeConfigsSynonym] = []

    def add(name: str, value: str | None, source: str) -> None:
        found.append(
            DescribeConfigsSynonym(
                name=name, value=None if sensitive else value, source=CONFIG_SOURCES[source]
            )
        )

    for layer, source in (
        (broker.dynamic_broker, "DYNAMIC_BROKER_CONFIG"),
        (broker.dynamic_default, "DYNAMIC_DEFAULT_BROKER_CONFIG"),
    ):
        for name in names:
            if name in layer:
                add(name, layer[name], source)
    for name in names:
        if broker.is_explicit(name):
            add(name, _BROKER_DEFS[name].render(broker.explicit()[name]), "STATIC_BROKER_CONFIG")
    for name in names:
        default = _BROKER_DEFS[name].default
        if default is not None:
            add(name, _BROKER_DEFS[name].render(default), "DEFAULT_CONFIG")
    return found


def _kafka_only_entry(
    config: BrokerConfig, kafka: KafkaOnlyConfig, request: DescribeConfigsRequest
) -> DescribeConfigsResourceResult:
    """A Kafka property without effect in pydmq, as Kafka describes it."""
    layers = (
        (config.dynamic_broker, "DYNAMIC_BROKER_CONFIG"),
        (config.dynamic_default, "DYNAMIC_DEFAULT_BROKER_CONFIG"),
        (config.kafka_only_values, "STATIC_BROKER_CONFIG"),
    )
    synonyms = [(layer[kafka.name], source) for layer, source in layers if kafka.name in layer]
    if kafka.default is not None:
        synonyms.append((kafka.default, "DEFAULT_CONFIG"))
    value, source = synonyms[0] if synonyms else (None, "DEFAULT_CONFIG")
    hide = kafka.sensitive
    return DescribeConfigsResourceResult(
        name=kafka.name,
        value=None if hide else value,
        read_only=not kafka.dynamic,
        config_source=CONFIG_SOURCES[source],
        is_sensitive=hide,
        synonyms=[
            DescribeConfigsSynonym(
                name=kafka.name, value=None if hide else v, source=CONFIG_SOURCES[src]
            )
            for v, src in synonyms
        ]
        if request.include_synonyms
        else [],
        config_type=int(kafka.type),
        documentation=None,
    )


def _custom_entry(
    name: str, source: str, request: DescribeConfigsRequest
) -> DescribeConfigsResourceResult:
    """A dynamic key that is no broker property (Kafka keeps and lists it, value hidden)."""
    return DescribeConfigsResourceResult(
        name=name,
        value=None,
        read_only=True,
        config_source=CONFIG_SOURCES[source],
        is_sensitive=True,
        synonyms=[DescribeConfigsSynonym(name=name, value=None, source=CONFIG_SOURCES[source])]
        if request.include_synonyms
        else [],
        config_type=_UNKNOWN_TYPE,
        documentation=None,
    )


def _entry(
    definition: ConfigDef,
    value: str | None,
    source: str,
    read_only: bool,
    synonyms: list[DescribeConfigsSynonym],
    request: DescribeConfigsRequest,
) -> DescribeConfigsResourceResult:
    return DescribeConfigsResourceResult(
        name=definition.name,
        value=None if definition.sensitive else value,
        read_only=read_only,
        config_source=CONFIG_SOURCES[source],
        is_sensitive=definition.sensitive,
        synonyms=synonyms if request.include_synonyms else [],
        config_type=int(definition.type),
        documentation=definition.doc if request.include_documentation else None,
    )


def _wanted(resource: DescribeConfigsResource) -> set[str] | None:
    keys = resource.configuration_keys
    return set(keys) if keys else None


def _topic_configs(
    ctx: BrokerContext, request: DescribeConfigsRequest, resource: DescribeConfigsResource
) -> list[DescribeConfigsResourceResult]:
    broker = ctx.broker
    name = resource.resource_name
    if topic_name_problem(name):
        raise _ResourceError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Invalid topic name {name!r}")
    topic = broker.topics.get(name)
    if topic is None:
        raise _ResourceError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist."
        )
    effective = TopicConfig(broker.config, topic.configs)
    wanted = _wanted(resource)
    entries = []
    for definition in TopicConfig.definitions():
        if wanted is not None and definition.name not in wanted:
            continue
        value = definition.render(effective.get(definition.name))
        synonyms: list[DescribeConfigsSynonym] = []
        if request.include_synonyms:
            if definition.name in effective.explicit:
                synonyms.append(
                    DescribeConfigsSynonym(
                        name=definition.name,
                        value=None if definition.sensitive else value,
                        source=CONFIG_SOURCES["DYNAMIC_TOPIC_CONFIG"],
                    )
                )
            synonyms += _broker_synonyms(
                broker.config,
                TOPIC_DEFAULT_SYNONYMS.get(definition.name, ()),
                definition.sensitive,
            )
        entries.append(
            _entry(
                definition,
                value,
                effective.source_of(definition.name),
                definition.read_only,
                synonyms,
                request,
            )
        )
    return entries


def _check_broker_id(ctx: BrokerContext, name: str) -> None:
    if name != str(ctx.broker.node_id):
        raise _ResourceError(
            ErrorCode.INVALID_REQUEST,
            f"Unexpected broker id, expected {ctx.broker.node_id} or empty string, but "
            f"received {name}",
        )


def _broker_configs(
    ctx: BrokerContext, request: DescribeConfigsRequest, resource: DescribeConfigsResource
) -> list[DescribeConfigsResourceResult]:
    config = ctx.broker.config
    wanted = _wanted(resource)
    if resource.resource_name == "":
        return _cluster_defaults(config, request, wanted)
    _check_broker_id(ctx, resource.resource_name)
    entries = []
    for definition in BROKER_CONFIGS:
        if wanted is not None and definition.name not in wanted:
            continue
        # As Kafka: the source is the first synonym's (log.retention.ms reports
        # STATIC_BROKER_CONFIG when only log.retention.minutes is set).
        synonyms = _broker_synonyms(config, broker_synonyms(definition.name), definition.sensitive)
        source = _SOURCE_NAMES[synonyms[0].source] if synonyms else "DEFAULT_CONFIG"
        entries.append(
            _entry(
                definition,
                definition.render(config.get(definition.name)),
                source,
                definition.read_only,
                synonyms,
                request,
            )
        )
    for kafka in kafka_only_configs().values():
        if wanted is None or kafka.name in wanted:
            entries.append(_kafka_only_entry(config, kafka, request))
    custom = {n: "DYNAMIC_DEFAULT_BROKER_CONFIG" for n in config.dynamic_default}
    custom.update((n, "DYNAMIC_BROKER_CONFIG") for n in config.dynamic_broker)
    for name, source in sorted(custom.items()):
        if _is_custom(name) and (wanted is None or name in wanted):
            entries.append(_custom_entry(name, source, request))
    return entries


def _is_custom(name: str) -> bool:
    return name not in _BROKER_DEFS and name not in kafka_only_configs()


def _cluster_defaults(
    config: BrokerConfig, request: DescribeConfigsRequest, wanted: set[str] | None
) -> list[DescribeConfigsResourceResult]:
    """The "" resource: the cluster-wide dynamic defaults set, each as its only synonym."""
    entries = []
    source = "DYNAMIC_DEFAULT_BROKER_CONFIG"
    for name in sorted(config.dynamic_default):
        if wanted is not None and name not in wanted:
            continue
        raw = config.dynamic_default[name]
        own = _BROKER_DEFS.get(name)
        kafka = kafka_only_configs().get(name)
        if own is None and kafka is None:
            entries.append(_custom_entry(name, source, request))
            continue
        sensitive = own.sensitive if own is not None else kafka is not None and kafka.sensitive
        kind = own.type if own is not None else kafka.type if kafka is not None else 0
        value = None if sensitive else raw
        entries.append(
            DescribeConfigsResourceResult(
                name=name,
                value=value,
                read_only=False,
                config_source=CONFIG_SOURCES[source],
                is_sensitive=sensitive,
                synonyms=[
                    DescribeConfigsSynonym(name=name, value=value, source=CONFIG_SOURCES[source])
                ]
                if request.include_synonyms
                else [],
                config_type=int(kind),
                documentation=None,
            )
        )
    return entries


def _logger_configs(
    ctx: BrokerContext, request: DescribeConfigsRequest, resource: DescribeConfigsResource
) -> list[DescribeConfigsResourceResult]:
    _check_broker_id(ctx, resource.resource_name)
    wanted = _wanted(resource)
    entries = []
    for name in broker_loggers():
        if wanted is not None and name not in wanted:
            continue
        entries.append(
            DescribeConfigsResourceResult(
                name=name,
                value=kafka_level(name),
                read_only=False,
                config_source=CONFIG_SOURCES["DYNAMIC_BROKER_LOGGER_CONFIG"],
                is_sensitive=False,
                synonyms=[],
                config_type=int(ConfigType.STRING),
                documentation=None,
            )
        )
    return entries


def _group_configs(
    ctx: BrokerContext, request: DescribeConfigsRequest, resource: DescribeConfigsResource
) -> list[DescribeConfigsResourceResult]:
    explicit = ctx.broker.share_groups.group_config(resource.resource_name)
    values = effective_group_configs(explicit, ctx.broker.config.static_configs())
    wanted = _wanted(resource)
    entries = []
    for definition in GROUP_CONFIGS:
        name = definition.name
        if wanted is not None and name not in wanted:
            continue
        source = CONFIG_SOURCES["DYNAMIC_GROUP_CONFIG" if name in explicit else "DEFAULT_CONFIG"]
        entries.append(
            DescribeConfigsResourceResult(
                name=name,
                value=values[name],
                read_only=False,
                config_source=source,
                is_sensitive=False,
                synonyms=[DescribeConfigsSynonym(name=name, value=values[name], source=source)]
                if request.include_synonyms
                else [],
                config_type=int(definition.type),
                documentation=definition.doc if request.include_documentation else None,
            )
        )
    return entries


def handle(
    ctx: BrokerContext, request: DescribeConfigsRequest
) -> DescribeConfigsResponse | Awaitable[DescribeConfigsResponse]:
    response = DescribeConfigsResponse()
    return in_slices(_describe(ctx, request, response), lambda: response)


def _describe(
    ctx: BrokerContext, request: DescribeConfigsRequest, response: DescribeConfigsResponse
) -> Iterator[int]:
    """Fill ``response`` one resource at a time; yields each resource's weight (1 + its
    configs)."""
    named = Counter((r.resource_type, r.resource_name) for r in request.resources)
    yield len(request.resources)
    for resource in request.resources:
        result = DescribeConfigsResult(
            error_code=ErrorCode.NONE,
            resource_type=resource.resource_type,
            resource_name=resource.resource_name,
        )
        response.results.append(result)
        try:
            if named[(resource.resource_type, resource.resource_name)] > 1:
                raise _ResourceError(
                    ErrorCode.INVALID_REQUEST,
                    f"Duplicate resource in the request: {resource.resource_name}",
                )
            refusal = config_resource_refusal(
                ctx, resource.resource_type, resource.resource_name, AclOperation.DESCRIBE_CONFIGS
            )
            if refusal:
                raise _ResourceError(refusal, "")
            if resource.resource_type == _TOPIC:
                result.configs = _topic_configs(ctx, request, resource)
            elif resource.resource_type == _BROKER:
                result.configs = _broker_configs(ctx, request, resource)
            elif resource.resource_type == _BROKER_LOGGER:
                result.configs = _logger_configs(ctx, request, resource)
            elif resource.resource_type == _GROUP:
                result.configs = _group_configs(ctx, request, resource)
            else:
                raise _ResourceError(
                    ErrorCode.INVALID_REQUEST,
                    f"Unsupported resource type: {resource.resource_type}",
                )
        except _ResourceError as exc:
            result.error_code = exc.error_code
            result.error_message = exc.message
            result.configs = []
        yield 1 + len(result.configs)


HANDLER = ApiHandlerSpec(32, 1, 4, handle, "DescribeConfigs")
