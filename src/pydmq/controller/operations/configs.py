"""Config changes: AlterConfigs (33) and IncrementalAlterConfigs (44).

TOPIC resources edit a topic's explicit configs. BROKER resources edit the dynamic broker
configs: the cluster-wide default (name "") or one broker's own (its id, registered or not,
as Kafka's controller accepts it), checked by :func:`pydmq.config.dynamic.updated_layer`
(Kafka's DynamicBrokerConfig rules and texts); a name that is neither "" nor a non-negative
base-10 int is INVALID_REQUEST with Kafka's ControllerConfigurationValidator texts. Whether
a broker id is the receiving broker's is the receiving broker's check, before it forwards.
GROUP resources (32, Kafka 4.x's GroupConfig) edit a group id's configs, checked by
:func:`pydmq.config.group_configs.check_group_configs` (INVALID_CONFIG); the group need not
exist, as in Kafka. Other resource types are refused with INVALID_REQUEST.

The result is a ConfigRecord per key whose value changes (a ``None`` value deletes the key),
so brokers learn exactly what changed; ``validate_only`` checks and writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from pydmq.config.definitions import ConfigError, ConfigType, parse_value
from pydmq.config.dynamic import (
    OP_APPEND,
    OP_DELETE,
    OP_SET,
    OP_SUBTRACT,
    DynamicConfigError,
    updated_layer,
)
from pydmq.config.group_configs import check_group_configs
from pydmq.config.topic import check_known
from pydmq.controller.operations.common import (
    DEFAULT_STRATEGY,
    STRATEGY_CONFIG,
    ControllerResult,
    OperationContext,
)
from pydmq.controller.operations.topics import (
    ENGINE_CONFIG,
    TopicOperationError,
    validate_topic_config_values,
)
from pydmq.metadata.image import MetadataImage
from pydmq.metadata.records import (
    RESOURCE_BROKER,
    RESOURCE_GROUP,
    RESOURCE_TOPIC,
    ConfigRecord,
    MetadataRecord,
)
from pydmq.protocol.errors import ErrorCode

__all__ = [
    "OP_APPEND",
    "OP_DELETE",
    "OP_SET",
    "OP_SUBTRACT",
    "AlterConfigsResource",
    "ConfigResourceResult",
    "IncrementalAlterConfigsResource",
    "alter_configs",
    "incremental_alter_configs",
]


@dataclass(frozen=True, slots=True)
class AlterConfigsResource:
    """AlterConfigs: the resource's complete new set of explicit configs."""

    resource_type: int
    resource_name: str
    configs: Mapping[str, str | None]


@dataclass(frozen=True, slots=True)
class IncrementalAlterConfigsResource:
    """IncrementalAlterConfigs: (name, operation, value) edits."""

    resource_type: int
    resource_name: str
    operations: Sequence[tuple[str, int, str | None]]


@dataclass(frozen=True, slots=True)
class ConfigResourceResult:
    resource_type: int
    resource_name: str
    error_code: int
    error_message: str | None = None


ResourceT = TypeVar("ResourceT", AlterConfigsResource, IncrementalAlterConfigsResource)


def _topic_exists(image: MetadataImage, resource_type: int, name: str) -> None:
    if resource_type != RESOURCE_TOPIC:
        raise TopicOperationError(
            ErrorCode.INVALID_REQUEST, f"resource type {resource_type} is not alterable here"
        )
    if name not in image.topics.by_name:
        raise TopicOperationError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist."
        )


def _apply_operations(
    current: Mapping[str, str], operations: Sequence[tuple[str, int, str | None]]
) -> dict[str, str | None]:
    configs: dict[str, str | None] = dict(current)
    for name, op, value in operations:
        if op not in (OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT):
            raise TopicOperationError(ErrorCode.INVALID_REQUEST, f"Unknown config operation {op}")
        if op != OP_DELETE and value is None:
            raise TopicOperationError(
                ErrorCode.INVALID_REQUEST, f"Null value not supported for : {name}"
            )
        try:
            definition = check_known(name)
        except ConfigError as exc:
            raise TopicOperationError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        if op == OP_SET:
            configs[name] = value
        elif op == OP_DELETE:
            configs.pop(name, None)
        else:
            if definition.type != ConfigType.LIST:
                verb = "append" if op == OP_APPEND else "subtract"
                raise TopicOperationError(
                    ErrorCode.INVALID_CONFIG,
                    f"Config value {verb} is not allowed for config key: {name}",
                )
            raw = configs.get(name)
            base = (
                parse_value(ConfigType.LIST, raw, name) if raw is not None else definition.default
            )
            items = [str(v) for v in base] if isinstance(base, list | tuple) else []
            given = parse_value(ConfigType.LIST, value, name)
            assert isinstance(given, list)
            if op == OP_APPEND:
                items += [str(v) for v in given if str(v) not in items]
            else:
                items = [v for v in items if v not in {str(g) for g in given}]
            configs[name] = ",".join(items)
    return configs


def _replace(
    image: MetadataImage, ctx: OperationContext, name: str, new: Mapping[str, str | None]
) -> list[MetadataRecord]:
    explicit = validate_topic_config_values(ctx, new)
    current = image.topic_config(name)
    # Fixed at creation (their effective values): a change would need the data to move.
    immutable = {STRATEGY_CONFIG: DEFAULT_STRATEGY, ENGINE_CONFIG: ctx.default_engine}
    for key, default in immutable.items():
        if explicit.get(key, default) != current.get(key, default):
            raise TopicOperationError(
                ErrorCode.INVALID_CONFIG, f"{key} cannot change after a topic is created"
            )
    return _config_records(RESOURCE_TOPIC, name, current, explicit)


def _config_records(
    resource_type: int, name: str, current: Mapping[str, str], new: Mapping[str, str]
) -> list[MetadataRecord]:
    """The ConfigRecords turning resource ``name``'s configs from ``current`` into ``new``:
    a null value for each key ``new`` leaves out, the value for each key it sets or changes."""
    records: list[MetadataRecord] = [
        ConfigRecord(resource_type, name, key, None) for key in current if key not in new
    ]
    records.extend(
        ConfigRecord(resource_type, name, key, value)
        for key, value in new.items()
        if current.get(key) != value
    )
    return records


_INT32_MAX = 2**31 - 1


def _check_broker_name(name: str) -> None:
    """ "" or a non-negative int32 in base 10 (Kafka's ControllerConfigurationValidator)."""
    if name == "":
        return
    digits = name[1:] if name[:1] in ("+", "-") else name
    if not (digits.isascii() and digits.isdigit()) or int(name) > _INT32_MAX:
        raise TopicOperationError(
            ErrorCode.INVALID_REQUEST, "Unable to parse broker name as a base 10 number."
        )
    if int(name) < 0:
        raise TopicOperationError(ErrorCode.INVALID_REQUEST, "Invalid negative broker ID.")


def _broker_records(
    image: MetadataImage,
    ctx: OperationContext,
    name: str,
    changes: Sequence[tuple[str, int, str | None]],
    *,
    replace: bool,
) -> list[MetadataRecord]:
    """The ConfigRecords turning BROKER resource ``name``'s layer into the layer after
    ``changes`` (``replace``: starting from an empty layer, AlterConfigs). A list property's
    APPEND/SUBTRACT starts from the layer, else (a broker's layer) the cluster default, else
    the controller's static configuration. Raises TopicOperationError."""
    _check_broker_name(name)
    current = image.broker_config(name)
    fallback = image.broker_config("") if name else {}

    def effective(key: str) -> str | None:
        return fallback.get(key, ctx.static_broker_configs.get(key))

    try:
        layer = updated_layer({} if replace else current, changes, effective)
    except DynamicConfigError as exc:
        raise TopicOperationError(ErrorCode(exc.error_code), exc.message) from None
    return _config_records(RESOURCE_BROKER, name, current, layer)


def _group_records(
    image: MetadataImage,
    ctx: OperationContext,
    name: str,
    changes: Sequence[tuple[str, int, str | None]],
    *,
    replace: bool,
) -> list[MetadataRecord]:
    """The ConfigRecords turning GROUP resource ``name``'s configs into those after
    ``changes`` (SET and DELETE; ``replace``: starting from none, AlterConfigs). Raises
    TopicOperationError or ConfigError."""
    if not name:
        raise TopicOperationError(ErrorCode.INVALID_REQUEST, "Group name must not be empty.")
    current = image.group_config(name)
    configs: dict[str, str] = {} if replace else dict(current)
    for key, op, value in changes:
        if op == OP_DELETE:
            configs.pop(key, None)
        elif op != OP_SET:
            raise TopicOperationError(
                ErrorCode.INVALID_REQUEST, f"Unsupported operation {op} on a group config: {key}"
            )
        elif value is None:
            raise TopicOperationError(
                ErrorCode.INVALID_REQUEST, f"Null value not supported for : {key}"
            )
        else:
            configs[key] = value
    check_group_configs(configs, ctx.static_broker_configs)
    return _config_records(RESOURCE_GROUP, name, current, configs)


def alter_configs(
    image: MetadataImage,
    ctx: OperationContext,
    resources: Sequence[AlterConfigsResource],
    *,
    validate_only: bool = False,
) -> ControllerResult[list[ConfigResourceResult]]:
    """Replace each resource's configs (keys left out are deleted): a topic's explicit
    configs, or a BROKER resource's dynamic layer."""

    def changes(res: AlterConfigsResource) -> list[MetadataRecord]:
        if res.resource_type == RESOURCE_BROKER:
            return _broker_records(
                image,
                ctx,
                res.resource_name,
                [(key, OP_SET, value) for key, value in res.configs.items()],
                replace=True,
            )
        if res.resource_type == RESOURCE_GROUP:
            return _group_records(
                image,
                ctx,
                res.resource_name,
                [(key, OP_SET, value) for key, value in res.configs.items()],
                replace=True,
            )
        _topic_exists(image, res.resource_type, res.resource_name)
        return _replace(image, ctx, res.resource_name, res.configs)

    return _per_resource(resources, changes, validate_only)


def incremental_alter_configs(
    image: MetadataImage,
    ctx: OperationContext,
    resources: Sequence[IncrementalAlterConfigsResource],
    *,
    validate_only: bool = False,
) -> ControllerResult[list[ConfigResourceResult]]:
    """Apply SET / DELETE / APPEND / SUBTRACT edits to each topic's explicit configs, or to
    a BROKER resource's dynamic layer (:func:`pydmq.config.dynamic.updated_layer`'s rules).

    Topic errors: unknown operation or a null value to SET/APPEND/SUBTRACT -> INVALID_REQUEST;
    unknown name, bad value, APPEND/SUBTRACT on a non-list -> INVALID_CONFIG.
    """

    def changes(res: IncrementalAlterConfigsResource) -> list[MetadataRecord]:
        if res.resource_type == RESOURCE_BROKER:
            return _broker_records(image, ctx, res.resource_name, res.operations, replace=False)
        if res.resource_type == RESOURCE_GROUP:
            return _group_records(image, ctx, res.resource_name, res.operations, replace=False)
        _topic_exists(image, res.resource_type, res.resource_name)
        new = _apply_operations(image.topic_config(res.resource_name), res.operations)
        return _replace(image, ctx, res.resource_name, new)

    return _per_resource(resources, changes, validate_only)


def _per_resource(
    resources: Sequence[ResourceT],
    changes: Callable[[ResourceT], list[MetadataRecord]],
    validate_only: bool,
) -> ControllerResult[list[ConfigResourceResult]]:
    """The records of ``changes(resource)`` for each resource it accepts (none when
    ``validate_only``), and a result per resource in request order: NONE, or the error a
    refused one raised (TopicOperationError's code, INVALID_CONFIG for a ConfigError)."""
    records: list[MetadataRecord] = []
    results: list[ConfigResourceResult] = []
    for res in resources:
        try:
            accepted = changes(res)
        except (TopicOperationError, ConfigError) as exc:
            code = getattr(exc, "error_code", ErrorCode.INVALID_CONFIG)
            results.append(
                ConfigResourceResult(res.resource_type, res.resource_name, code, str(exc))
            )
            continue
        results.append(ConfigResourceResult(res.resource_type, res.resource_name, ErrorCode.NONE))
        if not validate_only:
            records.extend(accepted)
    return ControllerResult(records, results)
