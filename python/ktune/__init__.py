"""ktune: autotuned CUDA kernels for PyTorch and any DLPack framework.

Tensors come in through DLPack (torch, CuPy, JAX; torch through a faster attribute path), are
checked before any launch (device, dtype, shape, strides, alignment: a TypeError or ValueError
naming the argument), and run on the framework's current CUDA stream (stream= overrides).
Outputs are allocated when not given (out=). Importing ktune never imports torch and needs no
GPU; without one, the first call raises KtuneError (a RuntimeError, status "no_device").
"""
from . import _ktune
from ._attention import flash_attention
from ._cli import devices, sweep
from ._errors import KtuneError, KtuneValueError
from ._fused import add_rmsnorm, bias_act, layernorm, softmax, swiglu
from ._moe import MoeOutput, moe
from ._runtime import configure, query, reset, runtime_report

__version__ = _ktune.version()

__all__ = ["KtuneError", "KtuneValueError", "MoeOutput", "__version__", "add_rmsnorm",
           "bias_act", "configure", "devices", "flash_attention", "layernorm", "moe", "query",
           "reset", "runtime_report", "softmax", "sweep", "swiglu"]
