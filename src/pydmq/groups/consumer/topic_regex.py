"""KIP-848 ``SubscribedTopicRegex``: RE2/J syntax, matched in linear time.

Kafka compiles a consumer group member's regex with RE2/J (``Pattern.compile``: Perl flags,
the syntax of Go's ``regexp/syntax``) and resolves it against every topic name with
``matcher(topic).matches()`` -- a full match, internal topics included. An invalid pattern is
answered INVALID_REGULAR_EXPRESSION with RE2/J's description of the error.

This module is that, without a dependency: :func:`compile_topic_regex` parses RE2's syntax
(refusing what RE2/J refuses, with its error descriptions: back-references, look-around,
atomic groups, possessive or stacked quantifiers, ``\\Z``, ``\\C``, repeat counts above 1000...;
accepting what it accepts and Python's ``re`` does not: ``\\z``, ``(?<name>``, ``\\Q...\\E``,
``(?U)``, ``[[:alpha:]]``, ``\\pL``, ``\\p{Greek}``) into a Thompson NFA, and
:meth:`TopicRegex.fullmatch` runs it as a lazily built DFA: time linear in the name whatever
the pattern (as RE2; a backtracking matcher on the event loop could be held for hours by a
pattern such as ``(a+)+b``). Only the yes/no of a full match is needed, so greedy and lazy
quantifiers are the same here.

Character semantics are RE2's: ``\\d \\s \\w \\b`` and the POSIX classes are ASCII; ``.``
leaves out ``\\n`` unless ``(?s)``; ``^``/``$`` are the text's ends unless ``(?m)``; ``(?i)``
folds case (with Unicode's K/S/Å extras). Unicode general categories come from
:mod:`unicodedata`. Script classes (``\\p{Latin}``, the script names of Unicode 15, as Go's)
are exact over ASCII, the only characters a Kafka topic name may hold; another character is
taken to belong to a script when its Unicode name starts with the script's name.

Sans-IO, no state shared between patterns; a :class:`TopicRegex` is owned by the group
coordinator's event loop (its caches are not locked).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

__all__ = ["RegexSyntaxError", "TopicRegex", "compile_topic_regex"]

_MAX_REPEAT: Final = 1000
_MAX_PROGRAM: Final = 100_000  # NFA instructions (RE2's "expression too large")
_MAX_CACHED: Final = 50_000  # DFA transitions and answers kept per pattern

# Parser flags.
_FOLD, _MULTILINE, _DOTNL = 1, 2, 4

_CATEGORIES: Final = frozenset(
    [
        "C",
        "Cc",
        "Cf",
        "Co",
        "Cs",
        "L",
        "Ll",
        "Lm",
        "Lo",
        "Lt",
        "Lu",
        "M",
        "Mc",
        "Me",
        "Mn",
        "N",
        "Nd",
        "Nl",
        "No",
        "P",
        "Pc",
        "Pd",
        "Pe",
        "Pf",
        "Pi",
        "Po",
        "Ps",
        "S",
        "Sc",
        "Sk",
        "Sm",
        "So",
        "Z",
        "Zl",
        "Zp",
        "Zs",
    ]
)
_SCRIPTS: Final = frozenset(
    [
        "Adlam",
        "Ahom",
        "Anatolian_Hieroglyphs",
        "Arabic",
        "Armenian",
        "Avestan",
        "Balinese",
        "Bamum",
        "Bassa_Vah",
        "Batak",
        "Bengali",
        "Bhaiksuki",
        "Bopomofo",
        "Brahmi",
        "Braille",
        "Buginese",
        "Buhid",
        "Canadian_Aboriginal",
        "Carian",
        "Caucasian_Albanian",
        "Chakma",
        "Cham",
        "Cherokee",
        "Chorasmian",
        "Common",
        "Coptic",
        "Cuneiform",
        "Cypriot",
        "Cypro_Minoan",
        "Cyrillic",
        "Deseret",
        "Devanagari",
        "Dives_Akuru",
        "Dogra",
        "Duployan",
        "Egyptian_Hieroglyphs",
        "Elbasan",
        "Elymaic",
        "Ethiopic",
        "Georgian",
        "Glagolitic",
        "Gothic",
        "Grantha",
        "Greek",
        "Gujarati",
        "Gunjala_Gondi",
        "Gurmukhi",
        "Han",
        "Hangul",
        "Hanifi_Rohingya",
        "Hanunoo",
        "Hatran",
        "Hebrew",
        "Hiragana",
        "Imperial_Aramaic",
        "Inherited",
        "Inscriptional_Pahlavi",
        "Inscriptional_Parthian",
        "Javanese",
        "Kaithi",
        "Kannada",
        "Katakana",
        "Kawi",
        "Kayah_Li",
        "Kharoshthi",
        "Khitan_Small_Script",
        "Khmer",
        "Khojki",
        "Khudawadi",
        "Lao",
        "Latin",
        "Lepcha",
        "Limbu",
        "Linear_A",
        "Linear_B",
        "Lisu",
        "Lycian",
        "Lydian",
        "Mahajani",
        "Makasar",
        "Malayalam",
        "Mandaic",
        "Manichaean",
        "Marchen",
        "Masaram_Gondi",
        "Medefaidrin",
        "Meetei_Mayek",
        "Mende_Kikakui",
        "Meroitic_Cursive",
        "Meroitic_Hieroglyphs",
        "Miao",
        "Modi",
        "Mongolian",
        "Mro",
        "Multani",
        "Myanmar",
        "Nabataean",
        "Nag_Mundari",
        "Nandinagari",
        "New_Tai_Lue",
        "Newa",
        "Nko",
        "Nushu",
        "Nyiakeng_Puachue_Hmong",
        "Ogham",
        "Ol_Chiki",
        "Old_Hungarian",
        "Old_Italic",
        "Old_North_Arabian",
        "Old_Permic",
        "Old_Persian",
        "Old_Sogdian",
        "Old_South_Arabian",
        "Old_Turkic",
        "Old_Uyghur",
        "Oriya",
        "Osage",
        "Osmanya",
        "Pahawh_Hmong",
        "Palmyrene",
        "Pau_Cin_Hau",
        "Phags_Pa",
        "Phoenician",
        "Psalter_Pahlavi",
        "Rejang",
        "Runic",
        "Samaritan",
        "Saurashtra",
        "Sharada",
        "Shavian",
        "Siddham",
        "SignWriting",
        "Sinhala",
        "Sogdian",
        "Sora_Sompeng",
        "Soyombo",
        "Sundanese",
        "Syloti_Nagri",
        "Syriac",
        "Tagalog",
        "Tagbanwa",
        "Tai_Le",
        "Tai_Tham",
        "Tai_Viet",
        "Takri",
        "Tamil",
        "Tangsa",
        "Tangut",
        "Telugu",
        "Thaana",
        "Thai",
        "Tibetan",
        "Tifinagh",
        "Tirhuta",
        "Toto",
        "Ugaritic",
        "Vai",
        "Vithkuqi",
        "Wancho",
        "Warang_Citi",
        "Yezidi",
        "Yi",
        "Zanabazar_Square",
    ]
)

Ranges = tuple[tuple[int, int], ...]

_DIGIT: Final[Ranges] = ((0x30, 0x39),)
_SPACE: Final[Ranges] = ((0x09, 0x0A), (0x0C, 0x0D), (0x20, 0x20))
_WORD: Final[Ranges] = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
_PERL: Final[dict[str, Ranges]] = {"d": _DIGIT, "s": _SPACE, "w": _WORD}
_POSIX: Final[dict[str, Ranges]] = {
    "alnum": ((0x30, 0x39), (0x41, 0x5A), (0x61, 0x7A)),
    "alpha": ((0x41, 0x5A), (0x61, 0x7A)),
    "ascii": ((0x00, 0x7F),),
    "blank": ((0x09, 0x09), (0x20, 0x20)),
    "cntrl": ((0x00, 0x1F), (0x7F, 0x7F)),
    "digit": _DIGIT,
    "graph": ((0x21, 0x7E),),
    "lower": ((0x61, 0x7A),),
    "print": ((0x20, 0x7E),),
    "punct": ((0x21, 0x2F), (0x3A, 0x40), (0x5B, 0x60), (0x7B, 0x7E)),
    "space": ((0x09, 0x0D), (0x20, 0x20)),
    "upper": ((0x41, 0x5A),),
    "word": _WORD,
    "xdigit": ((0x30, 0x39), (0x41, 0x46), (0x61, 0x66)),
}
# Unicode simple case folding beyond lower()/upper(): Kelvin sign, long s, Angstrom sign.
_FOLD_EXTRA: Final[dict[str, str]] = {
    "k": "\u212a",
    "K": "\u212a",
    "\u212a": "k",
    "s": "\u017f",
    "S": "\u017f",
    "\u017f": "s",
    "\u00e5": "\u212b",
    "\u00c5": "\u212b",
    "\u212b": "\u00e5",
}


class RegexSyntaxError(ValueError):
    """A pattern RE2/J refuses; the message is RE2/J's description of the error."""


# -- character classes ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Item:
    """One part of a class: code point ranges, or a Unicode table (category, script, Any)."""

    ranges: Ranges = ()
    table: str = ""
    negated: bool = False

    def contains(self, ch: str) -> bool:
        if self.table:
            hit = _in_table(self.table, ch)
        else:
            cp = ord(ch)
            hit = any(lo <= cp <= hi for lo, hi in self.ranges)
        return hit != self.negated


def _in_table(table: str, ch: str) -> bool:
    if table == "Any":
        return True
    if table in _CATEGORIES:
        category = unicodedata.category(ch)
        if table == "C":
            return category in ("Cc", "Cf", "Co", "Cs")
        return category.startswith(table)
    if ch.isascii():
        return (table == "Latin") == ch.isalpha() and table in ("Latin", "Common")
    name = unicodedata.name(ch, "")
    return name.startswith(table.upper().replace("_", " ") + " ")


@dataclass(frozen=True, slots=True)
class _Class:
    """A character matcher: the union of ``items``, then negated; ``fold`` = (?i)."""

    items: tuple[_Item, ...]
    negated: bool = False
    fold: bool = False

    def matches(self, ch: str) -> bool:
        candidates: Iterable[str] = _orbit(ch) if self.fold else (ch,)
        hit = any(item.contains(c) for c in candidates for item in self.items)
        return hit != self.negated


def _orbit(ch: str) -> set[str]:
    out = {ch}
    for other in (ch.lower(), ch.upper(), _FOLD_EXTRA.get(ch, ch)):
        if len(other) == 1:
            out.add(other)
    for other in list(out):
        extra = _FOLD_EXTRA.get(other)
        if extra is not None:
            out.update(c for c in (extra, extra.lower(), extra.upper()) if len(c) == 1)
    return out


def _literal(ch: str, flags: int) -> _Class:
    cp = ord(ch)
    return _Class((_Item(((cp, cp),)),), fold=bool(flags & _FOLD))


# -- syntax tree ---------------------------------------------------------------------------

# Zero-width assertions.
_BOT, _EOT, _BOL, _EOL, _WORD_B, _NOT_WORD_B = range(6)


@dataclass(frozen=True, slots=True)
class _Char:
    cls: _Class


@dataclass(frozen=True, slots=True)
class _Assert:
    kind: int


@dataclass(frozen=True, slots=True)
class _Cat:
    items: tuple[_Node, ...]


@dataclass(frozen=True, slots=True)
class _Alt:
    branches: tuple[_Node, ...]


@dataclass(frozen=True, slots=True)
class _Repeat:
    sub: _Node
    min: int
    max: int  # -1: unbounded


_Node = _Char | _Assert | _Cat | _Alt | _Repeat


def _size(node: _Node) -> int:
    """Instructions the node compiles to (bounded early: nested counts multiply)."""
    match node:
        case _Cat(items):
            return sum(_size(i) for i in items)
        case _Alt(branches):
            return 1 + sum(_size(b) for b in branches)
        case _Repeat(sub, lo, hi):
            return (max(lo, hi, 1) + 1) * (_size(sub) + 1)
        case _:
            return 1


class _Parser:
    """RE2/J's parser rules (Perl flags), producing a :data:`_Node`. One use per pattern."""

    def __init__(self, pattern: str) -> None:
        self.s = pattern
        self.i = 0
        self.flags = 0
        self.names: set[str] = set()

    def parse(self) -> _Node:
        node = self._alternation()
        if self.i < len(self.s):  # stopped at an unmatched ")"
            raise RegexSyntaxError("regexp/syntax: internal error")
        return node

    def _alternation(self) -> _Node:
        branches = [self._concat()]
        while self.i < len(self.s) and self.s[self.i] == "|":
            self.i += 1
            branches.append(self._concat())
        return branches[0] if len(branches) == 1 else _Alt(tuple(branches))

    def _concat(self) -> _Node:
        items: list[_Node] = []
        last_repeat = False
        s = self.s
        while self.i < len(s) and s[self.i] not in "|)":
            bounds = self._repeat_op()
            if bounds is not None:
                lo, hi = bounds
                if self.i < len(s) and s[self.i] == "?":  # non-greedy: same yes/no answer
                    self.i += 1
                if last_repeat:
                    raise RegexSyntaxError("invalid nested repetition operator")
                if not items:
                    raise RegexSyntaxError("missing argument to repetition operator")
                items[-1] = _Repeat(items[-1], lo, hi)
                last_repeat = True
                continue
            last_repeat = False
            items.extend(self._atom())
        return items[0] if len(items) == 1 else _Cat(tuple(items))

    def _repeat_op(self) -> tuple[int, int] | None:
        c = self.s[self.i]
        if c in "*+?":
            self.i += 1
            return {"*": (0, -1), "+": (1, -1), "?": (0, 1)}[c]
        if c != "{":
            return None
        parsed = self._counts(self.i + 1)
        if parsed is None:
            return None  # not a repeat: "{" is a literal
        lo, hi, end = parsed
        if lo < 0 or lo > _MAX_REPEAT or hi > _MAX_REPEAT or (hi >= 0 and lo > hi):
            raise RegexSyntaxError("invalid repeat count")
        self.i = end
        return lo, hi

    def _counts(self, i: int) -> tuple[int, int, int] | None:
        """``n}``, ``n,}`` or ``n,m}`` at ``i``: (min, max, index after "}"); -1 max = open.
        A number too large for RE2 is -2 (refused by the caller)."""
        lo, i = self._int(i)
        if lo is None or i >= len(self.s):
            return None
        hi = lo
        if self.s[i] == ",":
            i += 1
            if i >= len(self.s):
                return None
            if self.s[i] == "}":
                hi = -1
            else:
                upper, i = self._int(i)
                if upper is None:
                    return None
                hi = upper
                if hi == -2:
                    lo = -2
        if i >= len(self.s) or self.s[i] != "}":
            return None
        return lo, hi, i + 1

    def _int(self, i: int) -> tuple[int | None, int]:
        s = self.s
        start = i
        while i < len(s) and s[i].isascii() and s[i].isdigit():
            i += 1
        digits = s[start:i]
        if not digits or (len(digits) > 1 and digits[0] == "0"):
            return None, i
        return (int(digits) if len(digits) <= 8 else -2), i

    def _atom(self) -> list[_Node]:
        s, c = self.s, self.s[self.i]
        if c == "(":
            return self._group()
        if c == "[":
            return [_Char(self._class())]
        self.i += 1
        if c == ".":
            if self.flags & _DOTNL:
                return [_Char(_Class((_Item(table="Any"),)))]
            return [_Char(_Class((_Item(((0x0A, 0x0A),)),), negated=True))]
        if c == "^":
            return [_Assert(_BOL if self.flags & _MULTILINE else _BOT)]
        if c == "$":
            return [_Assert(_EOL if self.flags & _MULTILINE else _EOT)]
        if c != "\\":
            return [_Char(_literal(c, self.flags))]
        if self.i >= len(s):
            raise RegexSyntaxError("trailing backslash at end of expression")
        e = s[self.i]
        simple = {"A": _BOT, "z": _EOT, "b": _WORD_B, "B": _NOT_WORD_B}
        if e in simple:
            self.i += 1
            return [_Assert(simple[e])]
        if e == "C":
            raise RegexSyntaxError("invalid escape sequence")
        if e == "Q":
            end = s.find("\\E", self.i + 1)
            text = s[self.i + 1 :] if end < 0 else s[self.i + 1 : end]
            self.i = len(s) if end < 0 else end + 2
            return [_Char(_literal(ch, self.flags)) for ch in text]
        self.i -= 1
        item = self._class_escape()
        if item is not None:
            return [_Char(_Class((item,), fold=bool(self.flags & _FOLD)))]
        return [_Char(_literal(self._escape(), self.flags))]

    def _group(self) -> list[_Node]:
        s = self.s
        saved = self.flags
        if s.startswith("(?P<", self.i) or s.startswith("(?<", self.i):
            start = self.i + (4 if s[self.i + 2] == "P" else 3)
            end = s.find(">", start)
            name = s[start:end] if end >= 0 else ""
            if (
                end < 0
                or not name
                or not all(ch.isascii() and (ch.isalnum() or ch == "_") for ch in name)
            ):
                raise RegexSyntaxError("invalid named capture")
            if name in self.names:
                raise RegexSyntaxError("duplicate capture group name")
            self.names.add(name)
            self.i = end + 1
        elif s.startswith("(?", self.i):
            if self._flags():
                return []  # (?flags): they apply to the rest of the enclosing group
        else:
            self.i += 1
        node = self._alternation()
        if self.i >= len(s):
            raise RegexSyntaxError("missing closing )")
        self.i += 1
        self.flags = saved
        return [node]

    def _flags(self) -> bool:
        """``(?flags)`` (True: flags now set) or ``(?flags:`` (False: the group follows)."""
        s = self.s
        i = self.i + 2
        flags, sign, saw = self.flags, 1, False
        bits = {"i": _FOLD, "m": _MULTILINE, "s": _DOTNL, "U": 0}
        while i < len(s):
            c = s[i]
            i += 1
            if c in bits:
                flags = flags | bits[c] if sign > 0 else flags & ~bits[c]
                saw = True
            elif c == "-" and sign > 0:
                sign, saw = -1, False
            elif c in ":)":
                if sign < 0 and not saw:
                    break
                self.flags = flags
                self.i = i
                return c == ")"
            else:
                break
        raise RegexSyntaxError("invalid or unsupported Perl syntax")

    def _class(self) -> _Class:
        s = self.s
        self.i += 1
        negated = self.i < len(s) and s[self.i] == "^"
        if negated:
            self.i += 1
        items: list[_Item] = []
        first = True
        while self.i >= len(s) or s[self.i] != "]" or first:
            first = False
            if s.startswith("[:", self.i):
                posix = self._posix()
                if posix is not None:
                    items.append(posix)
                    continue
            item = self._class_escape() if s.startswith("\\", self.i) else None
            if item is not None:
                items.append(item)
                continue
            lo = self._class_char()
            hi = lo
            if s.startswith("-", self.i) and self.i + 1 < len(s) and s[self.i + 1] != "]":
                self.i += 1
                hi = self._class_char()
                if hi < lo:
                    raise RegexSyntaxError("invalid character class range")
            items.append(_Item(((ord(lo), ord(hi)),)))
        self.i += 1
        return _Class(tuple(items), negated=negated, fold=bool(self.flags & _FOLD))

    def _posix(self) -> _Item | None:
        end = self.s.find(":]", self.i + 2)
        if end < 0:
            return None
        name = self.s[self.i + 2 : end]
        negated = name.startswith("^")
        ranges = _POSIX.get(name[1:] if negated else name)
        if ranges is None:
            raise RegexSyntaxError("invalid character class range")
        self.i = end + 2
        return _Item(ranges, negated=negated)

    def _class_char(self) -> str:
        if self.i >= len(self.s):
            raise RegexSyntaxError("missing closing ]")
        if self.s[self.i] == "\\":
            return self._escape()
        self.i += 1
        return self.s[self.i - 1]

    def _class_escape(self) -> _Item | None:
        """``\\d \\D \\s \\S \\w \\W`` and ``\\pX \\p{Name} \\p{^Name} \\PX`` at ``i``."""
        s = self.s
        e = s[self.i + 1] if self.i + 1 < len(s) else ""
        if e.lower() in _PERL:
            self.i += 2
            return _Item(_PERL[e.lower()], negated=e.isupper())
        if e not in ("p", "P"):
            return None
        negated = e == "P"
        j = self.i + 2
        if j >= len(s):
            raise RegexSyntaxError("invalid character class range")
        if s[j] == "{":
            end = s.find("}", j)
            if end < 0:
                raise RegexSyntaxError("invalid character class range")
            name, j = s[j + 1 : end], end + 1
        else:
            name, j = s[j], j + 1
        if name.startswith("^"):
            negated, name = not negated, name[1:]
        if name != "Any" and name not in _CATEGORIES and name not in _SCRIPTS:
            raise RegexSyntaxError("invalid character class range")
        self.i = j
        return _Item(table=name, negated=negated)

    def _escape(self) -> str:
        """One escaped character at ``i`` (a backslash): Go's parseEscape."""
        s = self.s
        i = self.i + 1
        if i >= len(s):
            raise RegexSyntaxError("trailing backslash at end of expression")
        c = s[i]
        i += 1
        if c in "1234567" and (i >= len(s) or s[i] not in "01234567"):
            raise RegexSyntaxError("invalid escape sequence")
        if c in "01234567":
            value = int(c)
            for _ in range(2):
                if i < len(s) and s[i] in "01234567":
                    value = value * 8 + int(s[i])
                    i += 1
            self.i = i
            return chr(value)
        if c == "x":
            return self._hex(i)
        named = {"a": "\a", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
        if c in named:
            self.i = i
            return named[c]
        if c.isascii() and not c.isalnum():
            self.i = i
            return c
        raise RegexSyntaxError("invalid escape sequence")

    def _hex(self, i: int) -> str:
        s = self.s
        hexdigits = "0123456789abcdefABCDEF"
        if i < len(s) and s[i] == "{":
            end = s.find("}", i)
            digits = s[i + 1 : end] if end >= 0 else ""
            if digits and all(d in hexdigits for d in digits) and int(digits, 16) <= 0x10FFFF:
                self.i = end + 1
                return chr(int(digits, 16))
        elif i + 1 < len(s) and s[i] in hexdigits and s[i + 1] in hexdigits:
            self.i = i + 2
            return chr(int(s[i : i + 2], 16))
        raise RegexSyntaxError("invalid escape sequence")


# -- program and matching --------------------------------------------------------------------

_CHAR, _SPLIT, _ASSERT, _MATCH = range(4)
_Instruction = tuple[int, object, int]


def _is_word(ch: str | None) -> bool:
    return ch is not None and ch.isascii() and (ch.isalnum() or ch == "_")


def _holds(kind: int, prev: str | None, nxt: str | None) -> bool:
    if kind == _BOT:
        return prev is None
    if kind == _EOT:
        return nxt is None
    if kind == _BOL:
        return prev is None or prev == "\n"
    if kind == _EOL:
        return nxt is None or nxt == "\n"
    return (_is_word(prev) != _is_word(nxt)) == (kind == _WORD_B)


def _context(ch: str | None) -> str | None:
    """What an assertion can tell of a neighbouring character."""
    if ch is None or ch == "\n":
        return ch
    return "a" if _is_word(ch) else " "


class TopicRegex:
    """A compiled pattern: :meth:`fullmatch` is RE2/J's ``matcher(text).matches()``."""

    def __init__(self, pattern: str, root: _Node) -> None:
        self.pattern = pattern
        self._program: list[_Instruction] = [(_MATCH, None, -1)]
        self._start = self._compile(root, 0)
        self._starts: dict[str | None, frozenset[int]] = {}
        self._steps: dict[tuple[frozenset[int], str, str | None], frozenset[int]] = {}
        self._answers: dict[str, bool] = {}

    def __repr__(self) -> str:
        return f"TopicRegex({self.pattern!r})"

    def _emit(self, instruction: _Instruction) -> int:
        self._program.append(instruction)
        return len(self._program) - 1

    def _compile(self, node: _Node, nxt: int) -> int:
        """The entry of ``node``'s code, which continues at ``nxt`` (built back to front)."""
        match node:
            case _Char(cls):
                return self._emit((_CHAR, cls, nxt))
            case _Assert(kind):
                return self._emit((_ASSERT, kind, nxt))
            case _Cat(items):
                for item in reversed(items):
                    nxt = self._compile(item, nxt)
                return nxt
            case _Alt(branches):
                entries = tuple(self._compile(b, nxt) for b in branches)
                return self._emit((_SPLIT, entries, -1))
            case _Repeat(sub, lo, hi):
                tail = nxt
                if hi < 0:
                    loop = self._emit((_SPLIT, (), -1))
                    self._program[loop] = (_SPLIT, (self._compile(sub, loop), nxt), -1)
                    tail = loop
                else:
                    for _ in range(hi - lo):
                        tail = self._emit((_SPLIT, (self._compile(sub, tail), nxt), -1))
                for _ in range(lo):
                    tail = self._compile(sub, tail)
                return tail
        raise AssertionError(node)  # pragma: no cover

    def _closure(self, pcs: Iterable[int], prev: str | None, nxt: str | None) -> frozenset[int]:
        """The character and match instructions reachable from ``pcs`` between ``prev`` and
        ``nxt`` (None: an end of the text)."""
        program = self._program
        found: set[int] = set()
        seen: set[int] = set()
        stack = list(pcs)
        while stack:
            pc = stack.pop()
            if pc in seen:
                continue
            seen.add(pc)
            op, arg, target = program[pc]
            if op == _SPLIT:
                assert isinstance(arg, tuple)
                stack.extend(arg)
            elif op == _ASSERT:
                assert isinstance(arg, int)
                if _holds(arg, prev, nxt):
                    stack.append(target)
            else:
                found.add(pc)
        return frozenset(found)

    def _step(self, state: frozenset[int], ch: str, nxt: str | None) -> frozenset[int]:
        program = self._program
        moved = []
        for pc in state:
            op, cls, target = program[pc]
            if op == _CHAR:
                assert isinstance(cls, _Class)
                if cls.matches(ch):
                    moved.append(target)
        return self._closure(moved, ch, nxt)

    def fullmatch(self, text: str) -> bool:
        """True when the whole of ``text`` matches (RE2/J's ``Matcher.matches()``)."""
        answer = self._answers.get(text)
        if answer is not None:
            return answer
        if len(self._steps) > _MAX_CACHED:
            self._steps.clear()
        if len(self._answers) > _MAX_CACHED:
            self._answers.clear()
        first = _context(text[0]) if text else None
        state = self._starts.get(first)
        if state is None:
            state = self._starts[first] = self._closure((self._start,), None, first)
        steps = self._steps
        last = len(text) - 1
        for i, ch in enumerate(text):
            if not state:
                break
            nxt = _context(text[i + 1]) if i < last else None
            key = (state, ch, nxt)
            moved = steps.get(key)
            if moved is None:
                moved = steps[key] = self._step(state, ch, nxt)
            state = moved
        answer = 0 in state  # instruction 0 is MATCH
        self._answers[text] = answer
        return answer


def compile_topic_regex(pattern: str) -> TopicRegex:
    """Parse ``pattern`` with RE2/J's syntax; :class:`RegexSyntaxError` if RE2/J refuses it."""
    root = _Parser(pattern).parse()
    if _size(root) > _MAX_PROGRAM:
        raise RegexSyntaxError("expression too large")
    return TopicRegex(pattern, root)
