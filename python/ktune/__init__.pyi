# Type stubs of the ktune package (the docstrings in the modules give shapes and dtypes).
from os import PathLike
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple, TypeVar, Union

T = TypeVar("T")  # a tensor of the caller's framework (torch.Tensor, cupy.ndarray, ...)
Stream = Union[int, Any]  # a CUstream handle (int; 0: the legacy default stream) or a stream object

__version__: str

class KtuneError(RuntimeError):
    status: int
    status_name: str
    def __init__(self, message: str, status: int) -> None: ...

class KtuneValueError(KtuneError, ValueError): ...

def add_rmsnorm(x: T, residual: T, weight: T, eps: float = ..., *, out: Optional[T] = ...,
                residual_out: Optional[T] = ..., stream: Optional[Stream] = ...) -> Tuple[T, T]: ...
def layernorm(x: T, weight: T, bias: T, eps: float = ..., *, residual: Optional[T] = ...,
              out: Optional[T] = ..., residual_out: Optional[T] = ...,
              stream: Optional[Stream] = ...) -> Union[T, Tuple[T, T]]: ...
def bias_act(x: T, bias: T, activation: str = ..., *, out: Optional[T] = ...,
             stream: Optional[Stream] = ...) -> T: ...
def swiglu(x: T, *, out: Optional[T] = ..., stream: Optional[Stream] = ...) -> T: ...
def softmax(x: T, scale: float = ..., *, out: Optional[T] = ...,
            stream: Optional[Stream] = ...) -> T: ...

def flash_attention(q: T, k: T, v: T, *, causal: bool = ..., scale: Optional[float] = ...,
                    window: int = ..., softcap: float = ..., alibi_slopes: Optional[T] = ...,
                    block_table: Optional[T] = ..., seq_lens: Optional[T] = ...,
                    cu_seqlens_q: Optional[T] = ..., cu_seqlens_k: Optional[T] = ...,
                    max_seqlen_q: Optional[int] = ..., max_seqlen_k: Optional[int] = ...,
                    return_lse: bool = ..., out: Optional[T] = ..., lse_out: Optional[T] = ...,
                    impl: str = ..., q_scale: float = ..., k_scale: float = ...,
                    v_scale: float = ...,
                    stream: Optional[Stream] = ...) -> Union[T, Tuple[T, T]]: ...

class MoeOutput(NamedTuple):
    y: Any
    topk_ids: Any
    topk_weights: Any
    expert_counts: Any
    aux_loss: Any

def moe(x: T, w1: T, w2: T, *, logits: Optional[T] = ..., k: Optional[int] = ...,
        routing: Optional[str] = ..., topk_ids: Optional[T] = ..., topk_weights: Optional[T] = ...,
        correction_bias: Optional[T] = ..., n_group: int = ..., topk_group: int = ...,
        routed_scaling: float = ..., w1_scale: Optional[T] = ..., w2_scale: Optional[T] = ...,
        return_routing: bool = ..., out: Optional[T] = ...,
        stream: Optional[Stream] = ...) -> Union[T, MoeOutput]: ...

def configure(db: Union[str, PathLike, None] = ..., shipped: bool = ...) -> None: ...
def reset() -> None: ...
def runtime_report() -> str: ...
def query(op: str, dtype: str = ..., *, device: Optional[str] = ...,
          **shape: int) -> Dict[str, Any]: ...
def devices() -> List[Dict[str, Any]]: ...
def sweep(op: str, shape: Union[str, Dict[str, int], None] = ..., *, dtype: str = ...,
          db: Union[str, PathLike, None] = ..., strategy: Optional[str] = ...,
          budget: Optional[int] = ..., time_limit: Optional[float] = ...,
          tokens: Optional[Sequence[int]] = ..., force: bool = ..., device: Optional[int] = ...,
          progress: bool = ...) -> Dict[str, Any]: ...
