"""The errors of calls the package makes itself rather than through a
grpcio stub (a SelectPipeline reply, the native core): grpc.RpcError
subclasses with code() and details() as a failed grpcio call has them, so a
caller catches one type whichever path made the call."""

import grpc

_STATUS_CODES = {code.value[0]: code for code in grpc.StatusCode}


class CallError(grpc.RpcError):
    """A call that failed with a status (code() a grpc.StatusCode, details()
    the server's message, which names the field and row it refused)."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self._code = _STATUS_CODES.get(code, grpc.StatusCode.UNKNOWN)
        self._message = message

    def code(self):
        return self._code

    def details(self):
        return self._message

    def __str__(self):
        return f"{self._code.name}: {self._message}"


class SelectError(CallError):
    """A request a SelectPipeline answered with an error: code() and
    details() as a failed unary call's grpc.RpcError."""
