"""The exceptions of npu.runtime, mirroring FuriosaAI's legacy furiosa.runtime.errors where
a class applies. Every one carries the runtime's status name (``status``, e.g.
``"INVALID_ARGUMENT"``) and message (``message``); an error that completes an async request
also carries that request's ``context`` and ``request_id``.

Status code -> class: INVALID_ARGUMENT InvalidInput; NOT_FOUND NotFound (TensorNameNotFound
for a tensor name); PERMISSION_DENIED PermissionDenied; RESOURCE_EXHAUSTED DeviceBusy;
DEADLINE_EXCEEDED QueueWaitTimeout; CANCELLED RequestCancelled; DEVICE_LOST, DEVICE_TIMEOUT,
DEVICE_FAULT, ABORTED DeviceError; UNSUPPORTED UnsupportedFeature; INCOMPATIBLE
IncompatibleModel; CORRUPT_DATA InvalidModel; INTERNAL InternalError; UNAVAILABLE
SessionClosed or SessionTerminated (which one depends on the call, see npu.runtime.session).
"""

__all__ = [
    "NpuError", "FuriosaError", "NativeError", "InvalidInput", "NotFound", "TensorNameNotFound",
    "PermissionDenied", "DeviceBusy", "QueueWaitTimeout", "RequestCancelled", "DeviceError",
    "UnsupportedFeature", "IncompatibleModel", "InvalidModel", "InternalError",
    "SessionClosed", "SessionTerminated", "from_status",
]


class NpuError(Exception):
    """Base of every npu.runtime error."""

    default_status = "INTERNAL"

    def __init__(self, message="", status=None):
        self.message = message
        self.status = status or self.default_status
        self.context = None
        self.request_id = None
        self.code = None
        super().__init__(message)

    def __str__(self):
        return f"{self.status}: {self.message}" if self.message else self.status


# The legacy names: code written against furiosa.runtime catches these.
FuriosaError = NpuError
NativeError = NpuError


class InvalidInput(NpuError):
    """Inputs of the wrong count, dtype or shape, or another bad argument."""
    default_status = "INVALID_ARGUMENT"


class NotFound(NpuError):
    """A file, device or tensor that does not exist."""
    default_status = "NOT_FOUND"


class TensorNameNotFound(NotFound, InvalidInput):
    """run_with named a tensor the model does not have."""
    default_status = "NOT_FOUND"


class PermissionDenied(NpuError):
    default_status = "PERMISSION_DENIED"


class DeviceBusy(NpuError):
    """No room: a bounded queue is full, or the device is out of memory or contexts."""
    default_status = "RESOURCE_EXHAUSTED"


class QueueWaitTimeout(NpuError):
    """recv(timeout) found no completion in time (or submit found no room)."""
    default_status = "DEADLINE_EXCEEDED"


class RequestCancelled(NpuError):
    """The request was cancelled (AsyncSession.cancel, or its queue closed)."""
    default_status = "CANCELLED"


class DeviceError(NpuError):
    """The device faulted, hung, was reset or was lost while running the request."""
    default_status = "DEVICE_FAULT"


class UnsupportedFeature(NpuError):
    """An operator, dtype or capability the runtime does not support."""
    default_status = "UNSUPPORTED"


class IncompatibleModel(NpuError):
    """The image was built for other hardware (or another ISA or driver version)."""
    default_status = "INCOMPATIBLE"


class InvalidModel(NpuError):
    """A model image or file that failed verification."""
    default_status = "CORRUPT_DATA"


class InternalError(NpuError):
    """A bug in the runtime: please report it."""
    default_status = "INTERNAL"


class SessionClosed(NpuError):
    """The session (or the completion queue) was closed."""
    default_status = "UNAVAILABLE"


class SessionTerminated(NpuError):
    """The submit side was closed and every request has been received."""
    default_status = "UNAVAILABLE"


_BY_STATUS = {
    "INVALID_ARGUMENT": InvalidInput,
    "NOT_FOUND": NotFound,
    "PERMISSION_DENIED": PermissionDenied,
    "RESOURCE_EXHAUSTED": DeviceBusy,
    "DEADLINE_EXCEEDED": QueueWaitTimeout,
    "CANCELLED": RequestCancelled,
    "DEVICE_LOST": DeviceError,
    "DEVICE_TIMEOUT": DeviceError,
    "DEVICE_FAULT": DeviceError,
    "ABORTED": DeviceError,
    "UNSUPPORTED": UnsupportedFeature,
    "INCOMPATIBLE": IncompatibleModel,
    "CORRUPT_DATA": InvalidModel,
    "INTERNAL": InternalError,
}


def from_status(code, status, message, unavailable="SessionClosed"):
    """The exception for a runtime status (called by the extension module)."""
    if status == "UNAVAILABLE":
        cls = globals()[unavailable]
    else:
        cls = _BY_STATUS.get(status, InternalError)
    # The C API prefixes messages with the status name; keep the message itself.
    prefix = status + ": "
    if message.startswith(prefix):
        message = message[len(prefix):]
    exc = cls(message, status)
    exc.code = code
    return exc
