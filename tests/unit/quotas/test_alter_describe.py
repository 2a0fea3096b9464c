"""AlterClientQuotas as a controller operation and DescribeClientQuotas' filter (their
Kafka-compatibility over the wire is tests/interop/test_quotas_differential.py)."""

from __future__ import annotations

import pytest

from pydmq.controller.operations import ClientQuotaAlteration, alter_client_quotas, image_after
from pydmq.metadata.image import MetadataImage, quota_entity
from pydmq.metadata.records import ClientQuotaRecord, EntityData
from pydmq.protocol.errors import ErrorCode
from pydmq.quotas.describe import FilterComponent, QuotaFilterError, describe_client_quotas

pytestmark = pytest.mark.timeout(30)

ALICE = (("user", "alice"),)
APP = (("client-id", "app"),)


def _apply(image: MetadataImage, *alterations: ClientQuotaAlteration) -> MetadataImage:
    result = alter_client_quotas(image, list(alterations))
    return image_after(image, result.records)


def test_set_change_and_remove_write_records_only_for_changes() -> None:
    image = _apply(
        MetadataImage.EMPTY, ClientQuotaAlteration(ALICE, [("producer_byte_rate", 100.0)])
    )
    assert image.client_quotas == {ALICE: {"producer_byte_rate": 100.0}}
    same = alter_client_quotas(
        image, [ClientQuotaAlteration(ALICE, [("producer_byte_rate", 100.0)])]
    )
    assert same.records == []
    absent = alter_client_quotas(
        image, [ClientQuotaAlteration(ALICE, [("consumer_byte_rate", None)])]
    )
    assert absent.records == []
    removed = alter_client_quotas(
        image, [ClientQuotaAlteration(ALICE, [("producer_byte_rate", None)])]
    )
    assert removed.records == [
        ClientQuotaRecord((EntityData("user", "alice"),), "producer_byte_rate", 0.0, True)
    ]
    assert image_after(image, removed.records).client_quotas == {}


def test_validate_only_writes_nothing_and_answers_the_same() -> None:
    alteration = ClientQuotaAlteration(APP, [("consumer_byte_rate", 5.0)])
    checked = alter_client_quotas(MetadataImage.EMPTY, [alteration], validate_only=True)
    assert checked.records == []
    assert [r.error_code for r in checked.response] == [ErrorCode.NONE]


def test_a_bad_value_rejects_the_whole_entity_but_not_the_others() -> None:
    result = alter_client_quotas(
        MetadataImage.EMPTY,
        [
            ClientQuotaAlteration(ALICE, [("producer_byte_rate", 5.0), ("bogus", 1.0)]),
            ClientQuotaAlteration(APP, [("request_percentage", 12.5)]),
        ],
    )
    assert [(r.entity, r.error_code, r.error_message) for r in result.response] == [
        (ALICE, ErrorCode.INVALID_REQUEST, "Invalid configuration key bogus"),
        (APP, ErrorCode.NONE, None),
    ]
    assert [r.key for r in result.records if isinstance(r, ClientQuotaRecord)] == [
        "request_percentage"
    ]


def test_quotas_survive_a_snapshot() -> None:
    image = _apply(
        MetadataImage.EMPTY,
        ClientQuotaAlteration([("user", None), ("client-id", "x")], [("producer_byte_rate", 7.0)]),
        ClientQuotaAlteration([("ip", "10.0.0.1")], [("connection_creation_rate", 3.0)]),
    )
    rebuilt = image_after(MetadataImage.EMPTY, image.to_records())
    assert rebuilt.client_quotas == image.client_quotas
    assert quota_entity([("user", None), ("client-id", "x")]) in rebuilt.client_quotas


QUOTAS = {
    ALICE: {"producer_byte_rate": 1.0},
    quota_entity([("user", "alice"), ("client-id", "app")]): {"consumer_byte_rate": 2.0},
    quota_entity([("user", None)]): {"request_percentage": 3.0},
    APP: {"producer_byte_rate": 4.0},
    (("ip", None),): {"connection_creation_rate": 5.0},
}


@pytest.mark.parametrize(
    ("components", "strict", "expected"),
    [
        ([], False, 5),
        ([], True, 0),
        ([FilterComponent("user", 0, "alice")], False, 2),
        ([FilterComponent("user", 0, "alice")], True, 1),
        ([FilterComponent("user", 1, None)], False, 1),
        ([FilterComponent("user", 2, None)], False, 3),
        ([FilterComponent("client-id", 2, None)], True, 1),
        ([FilterComponent("ip", 1, None)], False, 1),
    ],
)
def test_filters_match_as_kafka(
    components: list[FilterComponent], strict: bool, expected: int
) -> None:
    assert len(describe_client_quotas(QUOTAS, components, strict)) == expected


def test_an_unknown_entity_type_is_unsupported_version() -> None:
    with pytest.raises(QuotaFilterError) as refused:
        describe_client_quotas(QUOTAS, [FilterComponent("group", 2, None)], False)
    assert refused.value.error_code == ErrorCode.UNSUPPORTED_VERSION
