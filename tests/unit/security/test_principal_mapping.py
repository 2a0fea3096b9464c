"""ssl.principal.mapping.rules: Kafka's documented examples and its rule grammar."""

from __future__ import annotations

import pytest

from pydmq.security.principal_mapping import NoMatchingRuleError, SslPrincipalMapper

pytestmark = pytest.mark.timeout(10)

# The example of Kafka's security documentation (ssl.principal.mapping.rules).
DOC_RULES = (
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,"
    "DEFAULT"
)


@pytest.mark.parametrize(
    ("dn", "name"),
    [
        ("CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown", "serviceuser"),
        ("CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown", "adminuser@admin"),
        ("CN=Duke,OU=ServiceUsers,O=Org,C=US", "Duke"),
        ("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"),
        ("DN=duke,OU=JavaSoft,O=Sun Microsystems,cn=Fred", "fred"),
        ("OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"),
    ],
)
def test_the_documented_rules(dn: str, name: str) -> None:
    assert SslPrincipalMapper.from_rules(DOC_RULES).name(dn) == name


def test_default_keeps_the_dn() -> None:
    mapper = SslPrincipalMapper.from_rules(None)
    assert mapper.name("CN=a,O=b") == "CN=a,O=b"
    assert SslPrincipalMapper.from_rules("DEFAULT").name("CN=a") == "CN=a"


def test_upper_case_and_several_groups() -> None:
    mapper = SslPrincipalMapper.from_rules("RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U")
    assert mapper.name("cn=a,ou=b,dc=c,dc=d") == "A@B"


def test_escaped_comma_in_a_pattern_and_spaces_between_rules() -> None:
    mapper = SslPrincipalMapper.from_rules(r"  RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/ ,  DEFAULT ")
    assert mapper.name(r"CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz") == r"Tkac\, Adam"
    assert mapper.name("O=x") == "O=x"


def test_escaped_slash_and_literal_dollar_in_the_replacement() -> None:
    mapper = SslPrincipalMapper.from_rules(r"RULE:^CN=([a-z]+)\/x$/\$$1\//")
    assert mapper.name("CN=abc/x") == "$abc/"


def test_no_matching_rule_is_an_error() -> None:
    mapper = SslPrincipalMapper.from_rules("RULE:^CN=(.*)$/$1/")
    with pytest.raises(NoMatchingRuleError, match="no rule applies to O=x"):
        mapper.name("O=x")


@pytest.mark.parametrize(
    "rules", ["DEFAULT2", "RULE:^CN=(.*)$/$1", "RULE:(/x/", "DEFAULT;RULE:a/b/", "garbage"]
)
def test_invalid_rules_are_refused(rules: str) -> None:
    with pytest.raises(ValueError, match="rule"):
        SslPrincipalMapper.from_rules(rules)
