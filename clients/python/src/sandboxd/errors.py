"""Errors raised by the sandboxd clients.

- :class:`SandboxRequestError`: the server answered with a non-2xx status
  (or the client refused a call that could not be valid, before sending).
- :class:`SandboxNotEnabledError`: 409 ``not_enabled``, the account does not
  have sandboxes. A subclass of SandboxRequestError, so catch it first.
- :class:`SandboxUnavailableError`: no answer at all (connection refused or
  reset, no answer within the request timeout, a stream that could not be
  reconnected). Never retried by the client.

All three derive from :class:`SandboxError`.
"""

from __future__ import annotations


class SandboxError(Exception):
    """Base of every error the clients raise on purpose."""


class SandboxRequestError(SandboxError):
    """The server refused the request; ``status`` is the HTTP status.

    ``code`` is the machine-readable code of the server's error body
    (``sandbox_not_found``, ``file_not_found``, ``cap_reached``, ...), or
    ``http_<status>`` when the body was not the API's. On a 408 ``timeout``
    of :meth:`stdin`, ``written`` says how many bytes reached the process.
    """

    def __init__(self, status: int, code: str, message: str, written: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.written = written

    def __str__(self) -> str:
        return f"{self.status} {self.code}: {self.message}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(status={self.status}, code={self.code!r}, message={self.message!r})"


class SandboxNotEnabledError(SandboxRequestError):
    """409 ``not_enabled``: the account does not have sandboxes."""

    def __init__(self, message: str, code: str = "not_enabled", status: int = 409) -> None:
        super().__init__(status, code, message)


class SandboxUnavailableError(SandboxError):
    """The server could not be reached, or did not answer in time.

    ``cause`` is the underlying exception (also ``__cause__``).
    """

    def __init__(self, message: str, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.cause = cause
        self.__cause__ = cause
