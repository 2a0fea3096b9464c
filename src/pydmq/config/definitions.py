"""Config definitions with Kafka's names, types, defaults and validation.

A :class:`ConfigDef` is the single source of truth for a property: the CLI, the properties/TOML
loader, DescribeConfigs (every config with its default and source) and Alter*Configs all read it.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal

__all__ = ["ConfigDef", "ConfigError", "ConfigType", "ConfigValues", "parse_value"]


class ConfigType(enum.IntEnum):
    """Kafka's DescribeConfigs config types (ConfigResource type codes of v3+)."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigError(ValueError):
    """An unknown property or a value that fails its definition (Kafka: INVALID_CONFIG)."""


Validator = Callable[[object], str | None]


@dataclass(frozen=True, slots=True)
class ConfigDef:
    """One property: name, type, default (None = no default), doc and optional validator."""

    name: str
    type: ConfigType
    default: object
    doc: str
    validator: Validator | None = None
    read_only: bool = False
    sensitive: bool = False

    def parse(self, raw: object) -> object:
        value = parse_value(self.type, raw, self.name)
        if self.validator is not None and value is not None:
            problem = self.validator(value)
            if problem:
                raise ConfigError(f"invalid value {raw!r} for {self.name}: {problem}")
        return value

    def render(self, value: object) -> str | None:
        """The string form DescribeConfigs returns."""
        if value is None:
            return None
        if self.type == ConfigType.BOOLEAN:
            return "true" if value else "false"
        if self.type == ConfigType.LIST:
            assert isinstance(value, list | tuple)
            return ",".join(str(v) for v in value)
        if self.type == ConfigType.DOUBLE and isinstance(value, float):
            return java_double(value)
        return str(value)


def java_double(value: float) -> str:
    """``value`` as Java's ``Double.toString`` writes it (Kafka's DescribeConfigs answers):
    plain between 10^-3 and 10^7, else ``d.dddE<n>`` (``1.7976931348623157E308``)."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    magnitude = abs(value)
    if magnitude == 0 or 1e-3 <= magnitude < 1e7:
        return repr(float(value))
    digits = Decimal(repr(value)).normalize().as_tuple()
    text = "".join(map(str, digits.digits))
    exponent = len(text) - 1 + int(digits.exponent)
    return f"{'-' if digits.sign else ''}{text[0]}.{text[1:] or '0'}E{exponent}"


def parse_value(kind: ConfigType, raw: object, name: str) -> object:
    if raw is None:
        return None
    if kind == ConfigType.BOOLEAN:
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in ("true", "false"):
            return text == "true"
        raise ConfigError(f"{name} must be true or false, got {raw!r}")
    if kind in (ConfigType.INT, ConfigType.SHORT, ConfigType.LONG):
        try:
            value = int(str(raw).strip()) if not isinstance(raw, int) else raw
        except ValueError:
            raise ConfigError(f"{name} must be an integer, got {raw!r}") from None
        limit = {ConfigType.INT: 2**31, ConfigType.SHORT: 2**15, ConfigType.LONG: 2**63}[kind]
        if not -limit <= value < limit:
            raise ConfigError(f"{name} is out of range: {value}")
        return value
    if kind == ConfigType.DOUBLE:
        try:
            return float(str(raw))
        except ValueError:
            raise ConfigError(f"{name} must be a number, got {raw!r}") from None
    if kind == ConfigType.LIST:
        if isinstance(raw, list | tuple):
            return [str(v).strip() for v in raw]
        text = str(raw).strip()
        return [part.strip() for part in text.split(",") if part.strip()] if text else []
    return str(raw)


def at_least(minimum: int) -> Validator:
    def check(value: object) -> str | None:
        assert isinstance(value, int)
        return None if value >= minimum else f"must be at least {minimum}"

    return check


def one_of(*choices: str) -> Validator:
    def check(value: object) -> str | None:
        return None if str(value) in choices else f"must be one of {', '.join(choices)}"

    return check


def list_of(*choices: str, allow_empty: bool = False) -> Validator:
    def check(value: object) -> str | None:
        assert isinstance(value, list)
        bad = [v for v in value if v not in choices]
        if not bad and (value or allow_empty):
            return None
        return f"must be a {'' if allow_empty else 'non-empty '}list of {', '.join(choices)}"

    return check


class ConfigValues:
    """Typed values over a set of definitions; remembers which were set explicitly."""

    def __init__(self, definitions: Iterable[ConfigDef], explicit: Mapping[str, object]) -> None:
        self.definitions: dict[str, ConfigDef] = {d.name: d for d in definitions}
        self._explicit: dict[str, object] = {}
        for name, raw in explicit.items():
            self.set(name, raw)

    def set(self, name: str, raw: object) -> None:
        definition = self.definitions.get(name)
        if definition is None:
            raise ConfigError(f"unknown config {name!r}")
        self._explicit[name] = definition.parse(raw)

    def unset(self, name: str) -> None:
        self._explicit.pop(name, None)

    def is_explicit(self, name: str) -> bool:
        return name in self._explicit

    def explicit(self) -> dict[str, object]:
        return dict(self._explicit)

    def get(self, name: str) -> object:
        if name in self._explicit:
            return self._explicit[name]
        return self.definitions[name].default

    def get_int(self, name: str) -> int:
        value = self.get(name)
        assert isinstance(value, int), name
        return value

    def get_str(self, name: str) -> str:
        value = self.get(name)
        return "" if value is None else str(value)

    def get_bool(self, name: str) -> bool:
        return bool(self.get(name))

    def get_list(self, name: str) -> list[str]:
        value = self.get(name)
        return list(value) if isinstance(value, list | tuple) else []
