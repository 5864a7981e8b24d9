"""Exceptions of the ktune package: a failed C API call raises KtuneError (a RuntimeError) with
ktune_last_error()'s message and the status code as `.status`; a call the C API refused for its
arguments raises KtuneValueError, which is also a ValueError."""
from . import _ktune

# ktune_status (ktune/ktune.h)
OK = 0
INVALID_ARGUMENT = 1
NO_DEVICE = 2
CUDA = 3
CUDA_STICKY = 4
COMPILE = 5
DATABASE = 6
INTERNAL = 7

STATUS_NAMES = {OK: "ok", INVALID_ARGUMENT: "invalid_argument", NO_DEVICE: "no_device",
                CUDA: "cuda", CUDA_STICKY: "cuda_sticky", COMPILE: "compile",
                DATABASE: "database", INTERNAL: "internal"}


class KtuneError(RuntimeError):
    """A ktune C API call failed. `status` is its ktune_status code, `status_name` its name
    (no_device: no CUDA driver or GPU; cuda_sticky: the CUDA context is no longer usable)."""

    def __init__(self, message, status):
        super().__init__(message)
        self.status = status
        self.status_name = STATUS_NAMES.get(status, str(status))


class KtuneValueError(KtuneError, ValueError):
    """The C API refused an argument (status invalid_argument); the message names it."""


def check(status):
    """Raises the exception of a failed status; the message is read on the calling thread right
    after the call, as ktune_last_error() keeps it per thread."""
    if status == OK:
        return
    message = _ktune.last_error() or f"ktune call failed with status {status}"
    cls = KtuneValueError if status == INVALID_ARGUMENT else KtuneError
    raise cls(message, status)
