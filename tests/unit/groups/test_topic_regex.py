"""RE2/J syntax and full-match semantics of KIP-848 topic regexes (groups/consumer/topic_regex).

The accept/refuse table was observed on Apache Kafka 4.4 (ConsumerGroupHeartbeat v1 with each
pattern: INVALID_REGULAR_EXPRESSION and RE2/J's description, or accepted); the differential
test ``consumer_regex`` replays part of it against the reference Kafka.
"""

from __future__ import annotations

import time

import pytest

from pydmq.groups.consumer.topic_regex import RegexSyntaxError, compile_topic_regex

pytestmark = pytest.mark.timeout(60)

ACCEPTED = [
    "a",
    "a\\z",
    "(?P<n>a)",
    "(?<n>a)",
    "(?P<1a>x)",
    "\\Q.*\\E",
    "\\Qab",
    "[[:alpha:]]+",
    "[[:^alpha:]]",
    "\\pL",
    "\\p{Greek}",
    "\\PL",
    "\\p{^L}",
    "\\p{Latin}",
    "\\p{Lu}",
    "\\pN",
    "\\p{Any}",
    "[\\p{L}]",
    "a{1000}",
    "(a{100}){100}",
    "(?i)x",
    "(?U)x*",
    "(?s).",
    "(?m)^a$",
    "(?i-s:a)",
    "(?)",
    "(?i)",
    "()",
    "(?:)",
    "\\12",
    "\\0",
    "\\x41",
    "\\x{41}",
    "\\a",
    "\\v",
    "[a-]",
    "[]a]",
    "[^]a]",
    "[[.a.]]",
    "{",
    "a{",
    "a{1",
    "a{,3}",
    "x{1,2}?",
    "a??",
    "a*?",
    "^*",
    "$+",
    "\\b*",
    "[\\d-z]",
    "\\_",
    "\\.",
    "\\ ",
    "__consumer.*",
    "",
]

REFUSED = {
    "(?=a)": "invalid or unsupported Perl syntax",
    "(?!a)": "invalid or unsupported Perl syntax",
    "(?<=a)b": "invalid named capture",
    "(?<!a)b": "invalid named capture",
    "(a)\\1": "invalid escape sequence",
    "a\\Z": "invalid escape sequence",
    "(?P=n)": "invalid or unsupported Perl syntax",
    "a*+": "invalid nested repetition operator",
    "a++": "invalid nested repetition operator",
    "a**": "invalid nested repetition operator",
    "a{2}{3}": "invalid nested repetition operator",
    "a*??": "invalid nested repetition operator",
    "[\\Q]\\E]": "invalid escape sequence",
    "[[:foo:]]": "invalid character class range",
    "\\p{Foo}": "invalid character class range",
    "\\Pn": "invalid character class range",
    "a{1001}": "invalid repeat count",
    "x{2,1}": "invalid repeat count",
    "(?x) a": "invalid or unsupported Perl syntax",
    "(?#c)a": "invalid or unsupported Perl syntax",
    "(?>a)": "invalid or unsupported Perl syntax",
    "(?-)": "invalid or unsupported Perl syntax",
    "\\C": "invalid escape sequence",
    "[z-a]": "invalid character class range",
    "\\8": "invalid escape sequence",
    "\\1": "invalid escape sequence",
    "\\x{110000}": "invalid escape sequence",
    "\\h": "invalid escape sequence",
    "\\e": "invalid escape sequence",
    "\\G": "invalid escape sequence",
    "\\u0041": "invalid escape sequence",
    "a\\E": "invalid escape sequence",
    "*a": "missing argument to repetition operator",
    "a|*": "missing argument to repetition operator",
    "[]": "missing closing ]",
    "[a": "missing closing ]",
    "[a-\\d]": "invalid escape sequence",
    "a)": "regexp/syntax: internal error",
    "(a": "missing closing )",
    "(?P<n>a)(?P<n>b)": "duplicate capture group name",
    "(?P<>x)": "invalid named capture",
    "a\\": "trailing backslash at end of expression",
}


@pytest.mark.parametrize("pattern", ACCEPTED)
def test_accepts_what_re2j_accepts(pattern: str) -> None:
    compile_topic_regex(pattern)


@pytest.mark.parametrize("pattern", sorted(REFUSED))
def test_refuses_what_re2j_refuses_with_its_description(pattern: str) -> None:
    with pytest.raises(RegexSyntaxError) as info:
        compile_topic_regex(pattern)
    assert str(info.value) == REFUSED[pattern]


MATCHES = [
    ("__consumer.*", "__consumer_offsets", True),
    ("a\\z", "a", True),
    ("(?i)FOO", "foo", True),
    ("(?i)k", "\u212a", True),
    ("(?<n>a)b", "ab", True),
    ("\\Q.*\\E", ".*", True),
    ("\\Q.*\\E", "ab", False),
    ("\\Qab\\E*", "abbb", True),
    ("[[:alpha:]]+", "abc", True),
    ("[[:alpha:]]+", "ab1", False),
    ("\\pL+\\pN", "ab1", True),
    ("\\p{Latin}+-\\p{Common}", "ab-1", True),
    ("\\p{Greek}", "a", False),
    ("\\d+", "123", True),
    ("\\w+", "a_1", True),
    ("\\w", "-", False),
    ("a|b", "ab", False),
    ("(a|b)*c", "abababc", True),
    ("x{2,3}", "xxxx", False),
    ("x{2,3}", "xxx", True),
    ("x{2,}", "xxxxx", True),
    ("^a$", "a", True),
    ("\\bfoo\\b", "foo", True),
    ("a\\Bb", "ab", True),
    ("a\\bb", "ab", False),
    (".*", "a\nb", False),
    ("(?s).*", "a\nb", True),
    ("(?m)^a$\n^b$", "a\nb", True),
    ("a$\nb", "a\nb", False),
    ("t.*", "topic", True),
    ("top", "topic", False),  # a full match, as Matcher.matches()
    ("(?U)a+?", "aaa", True),
    ("", "", True),
    ("a{0}", "", True),
]


@pytest.mark.parametrize(("pattern", "text", "expected"), MATCHES)
def test_full_match(pattern: str, text: str, expected: bool) -> None:
    regex = compile_topic_regex(pattern)
    assert regex.fullmatch(text) is expected
    assert regex.fullmatch(text) is expected  # the remembered answer


def test_matching_is_linear_whatever_the_pattern() -> None:
    """(a+)+b against 249 a's: a backtracking matcher takes 2^249 steps; here it is a
    lazily built DFA, answered at once (the bound only catches a wedge)."""
    regex = compile_topic_regex("(a+)+b")
    started = time.monotonic()
    assert not regex.fullmatch("a" * 249)
    assert time.monotonic() - started < 10


def test_nested_counts_are_bounded() -> None:
    with pytest.raises(RegexSyntaxError, match="expression too large"):
        compile_topic_regex("((a{1000}){1000}){1000}")
