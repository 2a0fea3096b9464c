"""Kafka's JAAS syntax, as its JaasConfig parses it."""

from __future__ import annotations

import pytest

from pydmq.security.sasl.jaas import JaasConfigError, parse_jaas_config, single_login_module

pytestmark = pytest.mark.timeout(30)

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def test_kafka_plain_example() -> None:
    entry = single_login_module(
        f'{PLAIN} required username="admin" password="admin-secret" '
        'user_admin="admin-secret" user_alice="alice-secret";'
    )
    assert entry.login_module == PLAIN
    assert entry.control_flag == "required"
    assert entry.options == {
        "username": "admin",
        "password": "admin-secret",
        "user_admin": "admin-secret",
        "user_alice": "alice-secret",
    }


def test_quotes_escapes_comments_and_unquoted_words() -> None:
    entry = single_login_module(
        f'{PLAIN} REQUIRED /* a comment */ a="x\\"y\\\\z\\n" b=\'single "q"\' '
        'c=word.with-dots_$1 // to the end of the line\n d="\\101\\0";'
    )
    assert entry.control_flag == "required"
    assert entry.options == {
        "a": 'x"y\\z\n',
        "b": 'single "q"',
        "c": "word.with-dots_$1",
        "d": "A\x00",
    }


def test_several_entries_parse_but_a_property_holds_one() -> None:
    text = f"{PLAIN} required; {PLAIN} optional a=b;"
    assert [e.control_flag for e in parse_jaas_config(text)] == ["required", "optional"]
    with pytest.raises(JaasConfigError, match="2 login modules"):
        single_login_module(text)
    with pytest.raises(JaasConfigError, match="0 login modules"):
        single_login_module("  // nothing\n")


@pytest.mark.parametrize(
    "text",
    [
        f'{PLAIN} required username="a"',  # no ';'
        f"{PLAIN};",  # no flag
        f"{PLAIN} mandatory;",  # unknown flag
        f"{PLAIN} required username;",  # no '='
        f"{PLAIN} required username=;",  # no value
        f"{PLAIN} required port=9092;",  # a number is not a value
        f'{PLAIN} required "key"="v";',  # a key is a word
        '"quoted.Module" required;',
        "= required;",
    ],
)
def test_syntax_errors(text: str) -> None:
    with pytest.raises(JaasConfigError):
        single_login_module(text)
