"""One blocking TCP connection to one broker: framing, request headers, correlation ids.

A :class:`BrokerConnection` negotiates API versions (ApiVersions) when it connects and then
sends one request at a time, waiting for its response (a synchronous client has at most one
request in flight, so responses cannot arrive out of order; the correlation id is checked
anyway).
"""

from __future__ import annotations

import socket
import ssl
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from pydmq.client.errors import (
    BrokerUnreachableError,
    KafkaConnectionError,
    KafkaError,
    UnsupportedApiError,
)
from pydmq.protocol.errors import ErrorCode, ProtocolError
from pydmq.protocol.framing import SIZE, encode_request_frame, response_size
from pydmq.protocol.headers import parse_response_header, response_correlation_id
from pydmq.protocol.messages import API_SCHEMAS, ApiSchema
from pydmq.protocol.messages.api_versions import (
    ApiVersionsRequest,
    ApiVersionsResponse,
)
from pydmq.protocol.primitives import Reader

if TYPE_CHECKING:
    from pydmq.security.sasl.client import SaslClient


__all__ = ["DEFAULT_TIMEOUT", "BrokerConnection", "parse_address"]

DEFAULT_TIMEOUT: Final = 30.0
_API_VERSIONS: Final = 18
_MAX_FRAME: Final = 256 * 1024 * 1024
_SOFTWARE_NAME: Final = "pydmq-client"
_SOFTWARE_VERSION: Final = "0.1.0"


def parse_address(address: str, default_port: int = 9092) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` too) to a (host, port) pair."""
    address = address.strip()
    if "://" in address:
        address = address.split("://", 1)[1]
    if address.startswith("["):
        host, _, rest = address[1:].partition("]")
        port = rest.lstrip(":")
        return host, int(port) if port else default_port
    host, sep, port = address.rpartition(":")
    if not sep:
        return address, default_port
    try:
        return host, int(port)
    except ValueError:
        raise ValueError(f"invalid port in address {address!r}") from None


class BrokerConnection:
    """A blocking connection; call :meth:`connect` (done by :class:`KafkaClient`) first."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str | None = "pydmq-cli",
        timeout: float = DEFAULT_TIMEOUT,
        version_caps: dict[int, int] | None = None,
        sasl: Callable[[], SaslClient] | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.sasl = sasl  # a SASL listener's client (PLAIN, SCRAM), None for PLAINTEXT
        self.ssl_context = ssl_context  # an SSL or SASL_SSL listener's TLS, None for plain TCP
        self.timeout = timeout
        self.version_caps = dict(version_caps or {})
        self.broker_versions: dict[int, tuple[int, int]] = {}
        self.versions: dict[int, int] = {}
        self._sock: socket.socket | None = None
        self._correlation_id = 0

    def __repr__(self) -> str:
        return f"BrokerConnection({self.host}:{self.port})"

    @property
    def connected(self) -> bool:
        return self._sock is not None

    # -- lifecycle ----------------------------------------------------------------------------

    def connect(self) -> None:
        """Open the socket and negotiate versions with ApiVersions; BrokerUnreachableError
        when no connection can be opened."""
        if self._sock is not None:
            return
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        except OSError as exc:
            raise BrokerUnreachableError(
                f"cannot connect to {self.host}:{self.port}: {exc.strerror or exc}"
            ) from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.ssl_context is not None:
            try:
                sock = self.ssl_context.wrap_socket(sock, server_hostname=self.host)
            except OSError as exc:  # ssl.SSLError included: a failed handshake
                sock.close()
                raise BrokerUnreachableError(
                    f"TLS handshake with {self.host}:{self.port} failed: {exc}"
                ) from exc
        self._sock = sock
        try:
            self._negotiate()
            if self.sasl is not None:
                self._authenticate(self.sasl())
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    def _negotiate(self) -> None:
        schema = API_SCHEMAS[_API_VERSIONS]
        version = min(schema.max_version, self.version_caps.get(_API_VERSIONS, schema.max_version))
        for _ in range(2):
            request = ApiVersionsRequest(
                client_software_name=_SOFTWARE_NAME, client_software_version=_SOFTWARE_VERSION
            )
            body = self._roundtrip(_API_VERSIONS, version, request, schema)
            assert isinstance(body, bytes)
            # An UNSUPPORTED_VERSION answer is always a v0 body listing what the broker serves.
            code = struct.unpack_from(">h", body, 0)[0] if len(body) >= 2 else 0
            decode_version = 0 if code == ErrorCode.UNSUPPORTED_VERSION else version
            reader = Reader(body)
            response: ApiVersionsResponse = schema.decode_response(reader, decode_version)
            if code == ErrorCode.UNSUPPORTED_VERSION:
                theirs = {k.api_key: k.max_version for k in response.api_keys}
                retry = min(version - 1, theirs.get(_API_VERSIONS, 0))
                if retry < schema.min_version or retry >= version:
                    break
                version = retry
                continue
            if response.error_code:
                raise KafkaError(response.error_code, "ApiVersions failed")
            self.broker_versions = {
                k.api_key: (k.min_version, k.max_version) for k in response.api_keys
            }
            self.versions = {}
            for key, (lo, hi) in self.broker_versions.items():
                ours = API_SCHEMAS.get(key)
                if ours is None:
                    continue
                top = min(hi, ours.max_version, self.version_caps.get(key, ours.max_version))
                if top >= max(lo, ours.min_version):
                    self.versions[key] = top
            return
        raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, "no common ApiVersions version")

    def _authenticate(self, client: SaslClient) -> None:
        """SaslHandshake then SaslAuthenticate until the client is done; KafkaError (the
        broker's error and message) when the broker refuses."""
        from pydmq.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
        from pydmq.protocol.messages.sasl_handshake import SaslHandshakeRequest
        from pydmq.security.sasl.errors import SaslAuthenticationError

        handshake = self.send(17, SaslHandshakeRequest(mechanism=client.mechanism), version=1)
        if handshake.error_code:
            raise KafkaError(
                handshake.error_code,
                f"{client.mechanism} refused; the broker enables {', '.join(handshake.mechanisms)}",
            )
        message: bytes | None = client.first_message()
        version = min(self.versions.get(36, 0), 2)
        while message is not None:
            answer = self.send(36, SaslAuthenticateRequest(auth_bytes=message), version=version)
            if answer.error_code:
                raise KafkaError(answer.error_code, answer.error_message or "")
            try:
                message = client.evaluate_challenge(answer.auth_bytes)
            except SaslAuthenticationError as exc:
                raise KafkaError(ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc)) from exc

    # -- requests -----------------------------------------------------------------------------

    def supports(self, api_key: int) -> bool:
        return api_key in self.versions

    def version_for(self, api_key: int) -> int:
        """The negotiated version of ``api_key``; raises UnsupportedApiError if there is none."""
        version = self.versions.get(api_key)
        if version is None:
            schema = API_SCHEMAS.get(api_key)
            name = schema.name if schema is not None else f"api key {api_key}"
            raise UnsupportedApiError(
                api_key, f"the broker at {self.host}:{self.port} does not support {name}"
            )
        return version

    def send(
        self,
        api_key: int,
        request: Any,
        *,
        version: int | None = None,
        expect_response: bool = True,
        timeout: float | None = None,
    ) -> Any:
        """Send ``request`` at the negotiated (or given) version; return the decoded response.

        With ``expect_response=False`` (a Produce with acks=0) nothing is read and None is
        returned.
        """
        self.connect()
        schema = API_SCHEMAS.get(api_key)
        if schema is None:
            raise UnsupportedApiError(api_key, f"no codec for api key {api_key}")
        if version is None:
            version = self.version_for(api_key)
        body = self._roundtrip(
            api_key, version, request, schema, expect_response=expect_response, timeout=timeout
        )
        if body is None:
            return None
        assert isinstance(body, bytes)
        reader = Reader(body)
        try:
            return schema.decode_response(reader, version)
        except ProtocolError as exc:
            raise KafkaError(
                ErrorCode.CORRUPT_MESSAGE, f"cannot decode {schema.name} v{version} response: {exc}"
            ) from exc

    def _roundtrip(
        self,
        api_key: int,
        version: int,
        request: Any,
        schema: ApiSchema,
        *,
        expect_response: bool = True,
        timeout: float | None = None,
    ) -> bytes | None:
        sock = self._sock
        if sock is None:
            raise KafkaConnectionError(f"not connected to {self.host}:{self.port}")
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        correlation_id = self._correlation_id
        data = encode_request_frame(api_key, version, request, correlation_id, self.client_id)
        try:
            sock.settimeout(self.timeout if timeout is None else timeout)
            sock.sendall(data)
            if not expect_response:
                return None
            try:
                size = response_size(self._recv_exact(sock, SIZE.size), _MAX_FRAME)
            except ProtocolError as exc:
                raise KafkaError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from exc
            frame = self._recv_exact(sock, size)
        except OSError as exc:
            self.close()
            what = "timed out" if isinstance(exc, TimeoutError) else str(exc)
            raise KafkaConnectionError(
                f"{schema.name} request to {self.host}:{self.port} failed: {what}"
            ) from exc
        except KafkaError:
            self.close()
            raise
        got = response_correlation_id(frame)
        if got != correlation_id:
            self.close()
            raise KafkaError(
                ErrorCode.CORRUPT_MESSAGE,
                f"correlation id mismatch: sent {correlation_id}, got {got}",
            )
        reader = parse_response_header(frame, api_key, version)
        return bytes(memoryview(frame)[reader.pos :])

    def _recv_exact(self, sock: socket.socket, n: int) -> bytes:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = sock.recv_into(view[got:], n - got)
            if k == 0:
                raise ConnectionResetError("connection closed by the broker")
            got += k
        return bytes(buf)
