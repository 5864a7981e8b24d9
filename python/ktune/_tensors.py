"""Tensors in: what ktune reads of an argument (address, device, dtype, shape, strides) through a
fast path for torch and DLPack for everything else, the checks made before any launch, the
framework's current stream, and outputs allocated like an input."""
import numbers
import sys

from . import _ktune

# DLPack device types and dtype codes.
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13
_DEVICE_NAMES = {_DL_CPU: "cpu", _DL_CUDA: "cuda", _DL_CUDA_HOST: "cuda_host (pinned host)",
                 4: "opencl", 7: "vulkan", 8: "metal", 10: "rocm", _DL_CUDA_MANAGED:
                 "cuda_managed"}
_DTYPES = {(4, 16): "bf16", (2, 16): "fp16", (2, 32): "fp32", (10, 8): "e4m3"}  # 10: e4m3fn
_DL_NAMES = {0: "int", 1: "uint", 2: "float", 4: "bfloat", 5: "complex", 6: "bool"}
# ktune_dtype (ktune/ktune.h)
C_DTYPES = {"fp32": 0, "fp16": 1, "bf16": 2, "e4m3": 4}
_TORCH_DTYPES = {"torch.bfloat16": "bf16", "torch.float16": "fp16", "torch.float32": "fp32",
                 "torch.float8_e4m3fn": "e4m3"}


class Tensor:
    """One argument as ktune sees it. `dtype` is "bf16", "fp16", "fp32", "e4m3" (OCP FP8
    e4m3fn) or the producer's own name for anything else; strides are in elements."""
    __slots__ = ("name", "obj", "framework", "ptr", "device_type", "device_id", "dtype",
                 "itemsize", "shape", "strides")

    @property
    def numel(self):
        n = 1
        for s in self.shape:
            n *= s
        return n


def _framework(obj):
    return type(obj).__module__.split(".")[0]


def view(name, obj):
    """The Tensor of argument `name`; TypeError if obj is not an array at all."""
    t = Tensor()
    t.name, t.obj = name, obj
    t.framework = _framework(obj)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        # Attribute reads: a DLPack export costs more than the whole launch on small problems.
        t.ptr = obj.data_ptr()
        dev = obj.device
        t.device_type = _DL_CUDA if dev.type == "cuda" else dev.type  # others: by name
        t.device_id = dev.index if dev.index is not None else 0
        t.dtype = _TORCH_DTYPES.get(str(obj.dtype), str(obj.dtype).replace("torch.", ""))
        t.itemsize = obj.element_size()
        t.shape = tuple(obj.shape)
        t.strides = tuple(obj.stride())
        return t
    if not hasattr(obj, "__dlpack__") and not hasattr(obj, "__array_interface__"):
        raise TypeError(f"{name}: expected a tensor (torch, CuPy, JAX or any DLPack array), got "
                        f"{type(obj).__module__}.{type(obj).__name__}")
    try:
        ptr, dev_type, dev_id, code, bits, lanes, shape, strides = _ktune.tensor_info(obj)
    except TypeError as e:
        cause = str(e)
        if hasattr(obj, "__dlpack__"):
            # The binding says only that the conversion failed; the producer's own export says
            # why (a read-only array, a dtype DLPack lacks, its own error).
            try:
                obj.__dlpack__()
            except Exception as why:  # noqa: BLE001 - any producer error is the reason
                cause = f"{type(why).__name__}: {why}"
        raise TypeError(f"{name}: {type(obj).__name__} could not be read through DLPack "
                        f"({cause})") from None
    t.ptr, t.device_type, t.device_id = ptr, dev_type, dev_id
    t.dtype = _DTYPES.get((code, bits)) if lanes == 1 else None
    if t.dtype is None:
        t.dtype = f"{_DL_NAMES.get(code, 'code' + str(code))}{bits}" + (
            f"x{lanes}" if lanes != 1 else "")
    t.itemsize = (bits * lanes + 7) // 8
    t.shape, t.strides = tuple(shape), tuple(strides)
    return t


def _device_text(t):
    if isinstance(t.device_type, str):
        return t.device_type
    return _DEVICE_NAMES.get(t.device_type, f"DLPack device type {t.device_type}")


def check(tensors, dtypes=("bf16", "fp16")):
    """Every tensor on the same CUDA device, of one dtype among `dtypes`, its address a multiple
    of its element size. Returns that dtype. TypeError for device and dtype, ValueError else."""
    first = tensors[0]
    for t in tensors:
        if t.device_type != _DL_CUDA:
            raise TypeError(f"{t.name}: a tensor in {_device_text(t)} memory; ktune runs on CUDA "
                            f"device memory")
        if t.dtype not in dtypes:
            raise TypeError(f"{t.name}: dtype {t.dtype} is not supported here (allowed: "
                            f"{', '.join(dtypes)})")
        if t.dtype != first.dtype:
            raise TypeError(f"{t.name}: dtype {t.dtype} differs from {first.name}'s "
                            f"{first.dtype} (every tensor of the call has one dtype)")
        if t.device_id != first.device_id:
            raise ValueError(f"{t.name}: on cuda:{t.device_id}, {first.name} on "
                             f"cuda:{first.device_id} (one device per call)")
        if t.ptr % t.itemsize != 0:
            raise ValueError(f"{t.name}: address {t.ptr:#x} is not a multiple of its element "
                             f"size ({t.itemsize} bytes)")
    return first.dtype


def contiguous(t):
    """Row-major without gaps (any number of dims; size-1 dims' strides are not looked at)."""
    expect = 1
    for size, stride in zip(reversed(t.shape), reversed(t.strides)):
        if size != 1 and stride != expect:
            return False
        expect *= size
    return True


def need_contiguous(t):
    if not contiguous(t):
        raise ValueError(f"{t.name}: strides {t.strides} for shape {t.shape} are not contiguous "
                         f"row-major (this op needs contiguous tensors: .contiguous() first)")


def need_shape(t, shape, what=None):
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"{t.name}: shape {t.shape}, expected {tuple(shape)}"
                         + (f" ({what})" if what else ""))


def integer(value, name, lo=0, hi=2**63 - 1):
    """An integer argument (a Python or numpy integer; not a bool, a float or a string) in
    [lo, hi], named in the error: floats would be truncated and strings parsed silently."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name}: {value!r} ({type(value).__name__}) is not an integer")
    v = int(value)
    if not lo <= v <= hi:
        raise ValueError(f"{name}={v} is out of range (allowed {lo}..{hi})")
    return v


def flag(value, name):
    """A yes/no argument: True or False (a numpy bool, or the integers 0 and 1, too)."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return bool(value)
    if isinstance(value, numbers.Integral) and int(value) in (0, 1):
        return bool(value)
    raise TypeError(f"{name}: {value!r} ({type(value).__name__}) is not True or False")


def rows(t, min_dims=1):
    """(rows, last dim) of a tensor read as a matrix over its last dim."""
    if len(t.shape) < min_dims or len(t.shape) == 0:
        raise ValueError(f"{t.name}: shape {t.shape} has no last dimension (at least "
                         f"{min_dims} dims)")
    n = t.shape[-1]
    return (t.numel // n if n else 0), n


def stream_of(stream, t):
    """The CUstream handle to launch on: `stream` when given (an int handle, 0 for the legacy
    default stream, or a torch/CuPy stream object), else the current stream of t's framework."""
    if stream is not None:
        for attr in ("cuda_stream", "ptr", "handle"):
            if hasattr(stream, attr):
                return integer(getattr(stream, attr), f"stream.{attr}", 0, 2**64 - 1)
        if isinstance(stream, bool) or not isinstance(stream, numbers.Integral):
            raise TypeError(f"stream: expected a CUstream handle (int) or a torch/CuPy stream, "
                            f"got {type(stream).__name__}")
        return integer(stream, "stream", 0, 2**64 - 1)
    if t.framework == "torch":
        torch = sys.modules["torch"]
        return torch.cuda.current_stream(t.obj.device).cuda_stream
    if t.framework == "cupy":
        return sys.modules["cupy"].cuda.get_current_stream().ptr
    raise ValueError(f"stream: {t.name} comes from {t.framework}, whose current stream ktune "
                     f"cannot read; pass stream= (a CUstream handle as int, 0 for the legacy "
                     f"default stream)")


def empty_like(t, shape, name, dtype=None):
    """A new uninitialised tensor of t's framework and device, of t's dtype or of `dtype`
    ("fp32", "int32" or "bf16"); torch and CuPy (no bf16) only."""
    if t.framework in ("torch", "cupy"):
        mod = sys.modules[t.framework]
        kind = None
        if dtype is not None:
            kind = getattr(mod, {"fp32": "float32", "int32": "int32", "bf16": "bfloat16"}[dtype],
                           None)
            if kind is None:
                raise ValueError(f"{name}: {t.framework} has no {dtype} dtype for ktune to "
                                 f"allocate; pass {name}=")
        if t.framework == "torch":
            return mod.empty(shape, dtype=kind or t.obj.dtype, device=t.obj.device)
        return mod.empty(shape, dtype=kind or t.obj.dtype)
    raise ValueError(f"{name}: ktune allocates outputs for torch and CuPy tensors only; pass "
                     f"{name}= for {t.framework} inputs")


class Torch:
    """The fast path for torch tensors: a handful of C-level attribute reads decide that a call
    is valid (CUDA, one supported dtype, one device, contiguous, the right shapes); anything else
    goes the general way, which says what is wrong. Reading strides, dtype names and the current
    stream object the general way cost more than the launch (benchmarks/python_overhead.py)."""

    torch = None
    codes = None
    raw_stream = None

    @classmethod
    def get(cls, x):
        """torch when x is a torch tensor (torch already imported by the caller), else None."""
        torch = sys.modules.get("torch")
        if torch is None or not isinstance(x, torch.Tensor):
            return None
        if cls.torch is None:
            cls.codes = {torch.bfloat16: C_DTYPES["bf16"], torch.float16: C_DTYPES["fp16"]}
            cls.raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
            cls.torch = torch
        return torch

    @classmethod
    def device(cls, x, *others):
        """x's CUDA device index when x and others are CUDA tensors of one supported dtype on
        it, contiguous; else None. Shapes are the caller's to check."""
        if x.dtype not in cls.codes or not x.is_cuda or not x.is_contiguous():
            return None
        dev = x.get_device()
        for t in others:
            if (not isinstance(t, cls.torch.Tensor) or t.dtype is not x.dtype or not t.is_cuda
                    or t.get_device() != dev or not t.is_contiguous()):
                return None
        return dev

    @classmethod
    def matrix(cls, x, *others):
        """(device, rows, last dim, C dtype) of torch tensor x read as a matrix over its last
        dim, when device() takes x and others and that dim is not empty; else None."""
        if cls.get(x) is None:
            return None
        dev = cls.device(x, *others)
        n = x.shape[-1] if x.shape else 0
        if dev is None or n == 0:
            return None
        return dev, x.numel() // n, n, cls.codes[x.dtype]

    @classmethod
    def output(cls, given, x, dev, shape):
        """`given` when it is a valid output for x (else None), or a new tensor shaped `shape`."""
        if given is None:  # (empty_like and new_empty: the cheapest allocations torch has)
            return cls.torch.empty_like(x) if shape == x.shape else x.new_empty(shape)
        if (not isinstance(given, cls.torch.Tensor) or given.shape != shape
                or cls.device(given) != dev or given.dtype is not x.dtype):
            return None
        return given

    @classmethod
    def stream(cls, dev):
        if cls.raw_stream is not None:
            return cls.raw_stream(dev)
        return cls.torch.cuda.current_stream(dev).cuda_stream
