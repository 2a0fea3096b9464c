"""Kafka's ``sasl.jaas.config`` syntax: ``<LoginModule class> <flag> (<key>=<value>)* ;``.

Parsed as Kafka's ``JaasConfig`` does with Java's ``StreamTokenizer``: whitespace separates
tokens; a word starts with a letter (or ``-``, ``_``, ``$``) and goes on with letters,
digits, ``.``, ``-``, ``_`` and ``$``; values are words or strings quoted with ``"`` or ``'``
(``\\n``, ``\\t``, ``\\"``, ``\\\\``, octal escapes and the others of Java's tokenizer); an
unquoted number is not a value; ``//`` and ``/* */`` comments are skipped; the flag is one of
``required``, ``requisite``, ``sufficient``, ``optional`` (any case); each entry ends with
``;``. A ``sasl.jaas.config`` property holds exactly one entry. Pure functions.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = ["JaasConfigError", "JaasLoginModule", "parse_jaas_config", "single_login_module"]

_FLAGS = frozenset({"required", "requisite", "sufficient", "optional"})
_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


class JaasConfigError(ValueError):
    """A ``sasl.jaas.config`` value that is not valid JAAS syntax (Kafka refuses it too)."""


@dataclass(frozen=True, slots=True)
class JaasLoginModule:
    """One JAAS entry: the login module's class name, its control flag and its options."""

    login_module: str
    control_flag: str
    options: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "word", "string", "number" or the character itself ("=", ";", ...)
    text: str


def _is_word_start(ch: str) -> bool:
    return ch.isalpha() or ch in "-_$" or ord(ch) >= 160


def _is_word_part(ch: str) -> bool:
    return _is_word_start(ch) or ch.isdigit() or ch == "."


def _tokens(text: str) -> Iterator[_Token]:
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch <= " ":
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif _is_word_start(ch):
            start = i
            while i < n and _is_word_part(text[i]):
                i += 1
            yield _Token("word", text[start:i])
        elif ch.isdigit() or ch == ".":
            start = i
            while i < n and (text[i].isdigit() or text[i] == "."):
                i += 1
            yield _Token("number", text[start:i])
        elif ch in "\"'":
            value, i = _quoted(text, i + 1, ch)
            yield _Token("string", value)
        else:
            yield _Token(ch, ch)
            i += 1


def _quoted(text: str, i: int, quote: str) -> tuple[str, int]:
    """The string after an opening quote at ``i - 1``; ends at the quote or the line's end
    (Java's tokenizer ends an unterminated string there too)."""
    out: list[str] = []
    n = len(text)
    while i < n and text[i] != quote and text[i] not in "\n\r":
        ch = text[i]
        if ch != "\\" or i + 1 >= n:
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt in "01234567":
            j = i + 1
            limit = j + (3 if nxt <= "3" else 2)
            while j < min(limit, n) and text[j] in "01234567":
                j += 1
            out.append(chr(int(text[i + 1 : j], 8)))
            i = j
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    end = i + 1 if i < n and text[i] == quote else i
    return "".join(out), end


def parse_jaas_config(text: str) -> list[JaasLoginModule]:
    """Every entry of ``text``; JaasConfigError on a syntax error."""
    tokens = list(_tokens(text))
    entries: list[JaasLoginModule] = []
    i = 0
    while i < len(tokens):
        module = tokens[i]
        if module.kind != "word":
            raise JaasConfigError(f"login module class expected, got {module.text!r}")
        if i + 1 >= len(tokens) or tokens[i + 1].kind != "word":
            raise JaasConfigError(f"login module control flag not specified for {module.text}")
        flag = tokens[i + 1].text.lower()
        if flag not in _FLAGS:
            raise JaasConfigError(f"invalid login module control flag {tokens[i + 1].text!r}")
        i += 2
        options: dict[str, str] = {}
        while i < len(tokens) and tokens[i].kind != ";":
            key = tokens[i]
            if key.kind != "word":
                raise JaasConfigError(f"unexpected token {key.text!r} in JAAS config")
            if i + 1 >= len(tokens) or tokens[i + 1].kind != "=":
                raise JaasConfigError(f"'=' expected after {key.text}")
            if i + 2 >= len(tokens) or tokens[i + 2].kind not in ("word", "string"):
                raise JaasConfigError(f"value not specified for key {key.text!r}")
            options[key.text] = tokens[i + 2].text
            i += 3
        if i >= len(tokens):
            raise JaasConfigError("login module entry not terminated by ';'")
        i += 1
        entries.append(JaasLoginModule(module.text, flag, options))
    return entries


def single_login_module(text: str) -> JaasLoginModule:
    """The one entry of a ``sasl.jaas.config`` property (Kafka refuses zero or several)."""
    entries = parse_jaas_config(text)
    if len(entries) != 1:
        raise JaasConfigError(
            f"JAAS config property contains {len(entries)} login modules, should be 1 module"
        )
    return entries[0]
