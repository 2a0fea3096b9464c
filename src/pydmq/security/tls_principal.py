"""The principal of an mTLS client: its certificate's subject DN, in the RFC 2253 form Java's
``X500Principal.getName()`` prints (what Kafka's ``ssl.principal.mapping.rules`` match), mapped
through those rules.

The DN is read from the certificate's DER bytes: RDNs last first, multi-valued RDNs joined by
``+``; the attribute types RFC 2253 names (CN, C, L, ST, O, OU, STREET, DC, UID) by keyword
and their string values escaped as Java does; any other type (emailAddress, serialNumber, ...)
by its dotted OID and ``#`` with the hex of its DER value. Pure functions; called by the event
loop once per TLS handshake with a client certificate.
"""

from __future__ import annotations

from pydmq.security.principal import ANONYMOUS, USER_TYPE, KafkaPrincipal
from pydmq.security.principal_mapping import SslPrincipalMapper

__all__ = ["rfc2253_subject", "ssl_principal"]

_KEYWORDS = {
    "2.5.4.3": "CN",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.9": "STREET",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
# DER string types -> codec.
_STRING_TAGS = {
    0x0C: "utf-8",  # UTF8String
    0x13: "ascii",  # PrintableString
    0x14: "latin-1",  # TeletexString
    0x16: "ascii",  # IA5String
    0x1A: "ascii",  # VisibleString
    0x1C: "utf-32-be",  # UniversalString
    0x1E: "utf-16-be",  # BMPString
}
_ESCAPED = frozenset(',=+<>#;"\\')


def ssl_principal(peer_certificate: bytes | None, mapper: SslPrincipalMapper) -> KafkaPrincipal:
    """``User:<mapped DN>`` of a client certificate (DER), ANONYMOUS without one; raises
    NoMatchingRuleError when no mapping rule applies, ValueError on an unreadable certificate."""
    if not peer_certificate:
        return ANONYMOUS
    from cryptography import x509  # only on TLS listeners

    try:
        subject = x509.load_der_x509_certificate(peer_certificate).subject.public_bytes()
    except Exception as exc:  # cryptography raises ValueError and its own errors
        raise ValueError(f"unreadable client certificate: {exc}") from exc
    return KafkaPrincipal(USER_TYPE, mapper.name(rfc2253_subject(subject)))


def rfc2253_subject(name_der: bytes) -> str:
    """The RFC 2253 string of a DER-encoded X.509 Name (see the module docstring)."""
    rdns: list[str] = []
    tag, start, end = _tlv(name_der, 0)
    if tag != 0x30:
        raise ValueError("an X.509 name is a SEQUENCE")
    pos = start
    while pos < end:
        set_tag, set_start, set_end = _tlv(name_der, pos)
        if set_tag != 0x31:
            raise ValueError("an RDN is a SET")
        attributes: list[str] = []
        inner = set_start
        while inner < set_end:
            _, seq_start, seq_end = _tlv(name_der, inner)
            oid_tag, oid_start, oid_end = _tlv(name_der, seq_start)
            if oid_tag != 0x06:
                raise ValueError("an attribute type is an OBJECT IDENTIFIER")
            oid = _oid(name_der[oid_start:oid_end])
            value_tag, value_start, value_end = _tlv(name_der, oid_end)
            attributes.append(
                _attribute(oid, value_tag, name_der[oid_end:value_end], value_start - oid_end)
            )
            inner = seq_end
        rdns.append("+".join(attributes))
        pos = set_end
    return ",".join(reversed(rdns))


def _attribute(oid: str, tag: int, tlv: bytes, header: int) -> str:
    keyword = _KEYWORDS.get(oid)
    codec = _STRING_TAGS.get(tag)
    if keyword is None or codec is None:
        return f"{keyword or oid}=#{tlv.hex()}"
    return f"{keyword}={_escape(tlv[header:].decode(codec, errors='replace'))}"


def _escape(value: str) -> str:
    out = "".join(f"\\{c}" if c in _ESCAPED else c for c in value)
    if out.startswith(" "):
        out = "\\" + out
    if out.endswith(" ") and len(out) > 1 and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def _tlv(data: bytes, pos: int) -> tuple[int, int, int]:
    """(tag, content start, content end) of the DER element at ``pos``."""
    if pos + 2 > len(data):
        raise ValueError("truncated DER")
    tag, length = data[pos], data[pos + 1]
    pos += 2
    if length & 0x80:
        count = length & 0x7F
        if count == 0 or count > 4 or pos + count > len(data):
            raise ValueError("bad DER length")
        length = int.from_bytes(data[pos : pos + count], "big")
        pos += count
    if pos + length > len(data):
        raise ValueError("truncated DER")
    return tag, pos, pos + length


def _oid(content: bytes) -> str:
    if not content:
        raise ValueError("empty OBJECT IDENTIFIER")
    arcs: list[int] = []
    value = 0
    for byte in content:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    first = arcs[0]
    head = [min(first // 40, 2), first - 40 * min(first // 40, 2)]
    return ".".join(str(arc) for arc in head + arcs[1:])
