"""Arrays that DLPack reports in CUDA device memory at a made-up address, so that the package's
argument checks can be tested on a machine without a GPU. They are never launched: a call whose
arguments all pass stops at the CUDA driver (no_device) before any memory is touched."""
import ctypes


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int32),
                ("dtype", _DType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _Managed(ctypes.Structure):
    pass


_Deleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(_Managed))
_Managed._fields_ = [("dl_tensor", _Tensor), ("manager_ctx", ctypes.c_void_p),
                     ("deleter", _Deleter)]
_noop = _Deleter(lambda _: None)

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]

DTYPES = {"bf16": (4, 16), "fp16": (2, 16), "fp32": (2, 32), "int32": (0, 32), "fp64": (2, 64),
          "e4m3": (10, 8)}  # 10: kDLFloat8_e4m3fn
CUDA, CPU = 2, 1


class FakeArray:
    """shape, dtype (a DTYPES key), address, strides in elements (None: contiguous), device."""

    def __init__(self, shape, dtype="bf16", ptr=0x7F00_0000_0000, strides=None, device_id=0,
                 device_type=CUDA):
        self.shape = tuple(shape)
        self.dtype = dtype
        self.ptr = ptr
        if strides is None:
            strides, step = [], 1
            for size in reversed(self.shape):
                strides.insert(0, step)
                step *= size
        self.strides = tuple(strides)
        self.device = (device_type, device_id)
        self._keep = []

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        n = len(self.shape)
        shape = (ctypes.c_int64 * max(n, 1))(*self.shape)
        strides = (ctypes.c_int64 * max(n, 1))(*self.strides)
        code, bits = DTYPES[self.dtype]
        m = _Managed()
        m.dl_tensor = _Tensor(self.ptr, _Device(*self.device), n, _DType(code, bits, 1),
                              ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64)),
                              ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64)), 0)
        m.deleter = _noop
        self._keep.append((m, shape, strides))
        return _capsule_new(ctypes.addressof(m), b"dltensor", None)
