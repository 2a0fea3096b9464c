"""``ssl.principal.mapping.rules``: Kafka's rules from a certificate's distinguished name to
a principal name.

The rules are a comma-separated list, tried in order; the first that applies gives the name:

- ``RULE:pattern/replacement/`` applies when the Java-style regular expression ``pattern``
  matches the whole DN; the name is the DN with every match of ``pattern`` replaced by
  ``replacement`` (``$1`` names a group, ``\\x`` is a literal ``x``); a trailing ``L`` or ``U``
  (``RULE:pattern/replacement/L``) lower- or upper-cases the result;
- ``DEFAULT`` gives the DN unchanged.

When no rule applies the connection cannot be authenticated (Kafka's ``NoMatchingRule``).
Pure functions; built once from the broker config and then used by the event loop.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["NoMatchingRuleError", "PrincipalMappingRule", "SslPrincipalMapper"]


class NoMatchingRuleError(ValueError):
    """No rule of ``ssl.principal.mapping.rules`` applies to a DN."""


@dataclass(frozen=True, slots=True)
class PrincipalMappingRule:
    """One rule; ``pattern`` None is ``DEFAULT``."""

    pattern: re.Pattern[str] | None
    replacement: str = ""
    to_lower_case: bool = False
    to_upper_case: bool = False

    def apply(self, distinguished_name: str) -> str | None:
        """The name this rule gives ``distinguished_name``, None if it does not apply."""
        if self.pattern is None:
            return distinguished_name
        if self.pattern.fullmatch(distinguished_name) is None:
            return None
        replacement = self.replacement
        result = self.pattern.sub(lambda m: _expand(replacement, m), distinguished_name)
        if self.to_lower_case:
            return result.lower()
        if self.to_upper_case:
            return result.upper()
        return result

    def __str__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        case = "L" if self.to_lower_case else "U" if self.to_upper_case else ""
        return f"RULE:{self.pattern.pattern}/{self.replacement}/{case}"


class SslPrincipalMapper:
    """The parsed rules of ``ssl.principal.mapping.rules`` (see the module docstring)."""

    def __init__(self, rules: list[PrincipalMappingRule]) -> None:
        self.rules = rules

    @classmethod
    def from_rules(cls, text: str | None) -> SslPrincipalMapper:
        """Parse ``text`` (None: ``DEFAULT``); ValueError names an invalid rule."""
        return cls(_parse_rules("DEFAULT" if text is None else text))

    def name(self, distinguished_name: str) -> str:
        """The principal name of ``distinguished_name``; NoMatchingRuleError if no rule applies."""
        for rule in self.rules:
            name = rule.apply(distinguished_name)
            if name is not None:
                return name
        rules = ", ".join(str(rule) for rule in self.rules)
        raise NoMatchingRuleError(f"no rule applies to {distinguished_name}, rules [{rules}]")


def _parse_rules(text: str) -> list[PrincipalMappingRule]:
    rules: list[PrincipalMappingRule] = []
    pos = 0
    while pos < len(text):
        pos = _skip_spaces(text, pos)
        if pos >= len(text):
            break
        if text.startswith("DEFAULT", pos):
            rules.append(PrincipalMappingRule(None))
            pos += len("DEFAULT")
        elif text.startswith("RULE:", pos):
            pattern, pos = _until_slash(text, pos + len("RULE:"))
            replacement, pos = _until_slash(text, pos)
            case = text[pos] if pos < len(text) and text[pos] in "LU" else ""
            pos += len(case)
            try:
                compiled = re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"invalid rule pattern {pattern!r}: {exc}") from exc
            rules.append(PrincipalMappingRule(compiled, replacement, case == "L", case == "U"))
        else:
            end = text.find(",", pos)
            raise ValueError(f"invalid rule: {text[pos : None if end < 0 else end]!r}")
        pos = _skip_spaces(text, pos)
        if pos < len(text):
            if text[pos] != ",":
                raise ValueError(f"invalid rule: unmatched {text[pos:]!r}")
            pos += 1
    return rules


def _skip_spaces(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def _until_slash(text: str, pos: int) -> tuple[str, int]:
    """The text up to the next unescaped ``/`` (kept escaped) and the position after it."""
    out: list[str] = []
    while pos < len(text):
        char = text[pos]
        if char == "\\" and pos + 1 < len(text):
            out.append(text[pos : pos + 2])
            pos += 2
            continue
        if char == "/":
            return "".join(out), pos + 1
        out.append(char)
        pos += 1
    raise ValueError(f"invalid rule: missing '/' after {''.join(out)!r}")


def _expand(replacement: str, match: re.Match[str]) -> str:
    """Java's ``Matcher.appendReplacement`` syntax: ``$n``, ``${name}``, ``\\x``."""
    out: list[str] = []
    pos = 0
    while pos < len(replacement):
        char = replacement[pos]
        if char == "\\" and pos + 1 < len(replacement):
            out.append(replacement[pos + 1])
            pos += 2
        elif char == "$" and replacement.startswith("{", pos + 1):
            end = replacement.index("}", pos)
            out.append(match.group(replacement[pos + 2 : end]) or "")
            pos = end + 1
        elif char == "$" and pos + 1 < len(replacement) and replacement[pos + 1].isdigit():
            # Java takes further digits while they still name a group.
            group = int(replacement[pos + 1])
            pos += 2
            while pos < len(replacement) and replacement[pos].isdigit():
                longer = group * 10 + int(replacement[pos])
                if longer > (match.re.groups):
                    break
                group, pos = longer, pos + 1
            out.append(match.group(group) or "")
        else:
            out.append(char)
            pos += 1
    return "".join(out)
