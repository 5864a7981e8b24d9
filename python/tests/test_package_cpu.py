"""The Python package on a machine without a GPU (CI): import, version, every argument check
(wrong device, dtype, shape, strides, alignment, stream, outputs) raising the right exception
with a message that names the argument, the no-GPU error at the first call, configure and the
runtime report against a recorded database. Arrays in CUDA memory are faked through DLPack
(fake_dlpack.py): none reaches a GPU."""
import ctypes
import os
import pathlib
import re
import shutil
import sqlite3
import subprocess
import sys

import pytest

import ktune
from fake_dlpack import CPU, FakeArray

ROOT = pathlib.Path(__file__).resolve().parents[2]


def has_cuda_driver():
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


def test_version_is_the_projects():
    text = (ROOT / "CMakeLists.txt").read_text()
    want = re.search(r"project\(ktune VERSION ([0-9.]+)", text).group(1)
    assert ktune.__version__ == want


def test_import_does_not_import_torch():
    code = "import sys, ktune; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def call_with(fn, positional, defaults, change):
    """fn(*positional arguments, **the rest) from `defaults` updated with `change`."""
    args = dict(defaults, **change)
    first = [args.pop(name) for name in positional]
    return fn(*first, **args)


RMSNORM_ARGS = dict(
    x=FakeArray((4, 128)), residual=FakeArray((4, 128), ptr=0x7F00_0001_0000),
    weight=FakeArray((128,), ptr=0x7F00_0002_0000),
    out=FakeArray((4, 128), ptr=0x7F00_0003_0000),
    residual_out=FakeArray((4, 128), ptr=0x7F00_0004_0000), stream=0)


def call_rmsnorm(**change):
    return call_with(ktune.add_rmsnorm, ("x", "residual", "weight"), RMSNORM_ARGS, change)


def raises(exc, pattern, fn, *args, **kwargs):
    with pytest.raises(exc) as info:
        fn(*args, **kwargs)
    assert re.search(pattern, str(info.value)), str(info.value)
    return info.value


def test_host_memory_is_refused():
    raises(TypeError, r"^x: a tensor in cpu memory; ktune runs on CUDA device memory",
           call_rmsnorm, x=FakeArray((4, 128), device_type=CPU))
    np = pytest.importorskip("numpy")
    raises(TypeError, r"^weight: a tensor in cpu memory", call_rmsnorm,
           weight=np.zeros(128, dtype=np.float32))


def test_not_an_array():
    raises(TypeError, r"^residual: expected a tensor \(torch, CuPy, JAX or any DLPack array\), "
           r"got builtins.list", call_rmsnorm, residual=[1.0, 2.0])


def test_dtypes():
    raises(TypeError, r"^x: dtype int32 is not supported here \(allowed: bf16, fp16\)",
           call_rmsnorm, x=FakeArray((4, 128), dtype="int32"))
    raises(TypeError, r"^residual: dtype fp16 differs from x's bf16", call_rmsnorm,
           residual=FakeArray((4, 128), dtype="fp16", ptr=0x7F00_0001_0000))
    raises(TypeError, r"^out: dtype fp32 is not supported here \(allowed: bf16, fp16\)",
           call_rmsnorm, out=FakeArray((4, 128), dtype="fp32", ptr=0x7F00_0003_0000))
    raises(TypeError, r"^out: dtype fp16 differs from x's bf16", call_rmsnorm,
           out=FakeArray((4, 128), dtype="fp16", ptr=0x7F00_0003_0000))


def test_shapes():
    raises(ValueError, r"^residual: shape \(4, 64\), expected \(4, 128\) \(like x\)",
           call_rmsnorm, residual=FakeArray((4, 64), ptr=0x7F00_0001_0000))
    raises(ValueError, r"^weight: shape \(64,\), expected \(128,\) \(x's last dim\)",
           call_rmsnorm, weight=FakeArray((64,), ptr=0x7F00_0002_0000))
    raises(ValueError, r"^out: shape \(128, 4\), expected \(4, 128\)", call_rmsnorm,
           out=FakeArray((128, 4), ptr=0x7F00_0003_0000))
    raises(ValueError, r"^x: last dim 127 is odd", ktune.swiglu, FakeArray((3, 127)),
           out=FakeArray((3, 63), ptr=0x7F00_0003_0000), stream=0)
    raises(ValueError, r"^x: shape \(\) has no last dimension", ktune.softmax, FakeArray(()),
           stream=0)


def test_strides():
    # Every other row of an [8, 128] tensor: rows 256 elements apart.
    raises(ValueError, r"^x: strides \(256, 1\) for shape \(4, 128\) are not contiguous "
           r"row-major", call_rmsnorm, x=FakeArray((4, 128), strides=(256, 1)))
    raises(ValueError, r"^residual_out: strides \(1, 4\) for shape \(4, 128\) are not "
           r"contiguous", call_rmsnorm,
           residual_out=FakeArray((4, 128), strides=(1, 4), ptr=0x7F00_0004_0000))


def test_alignment_and_devices():
    raises(ValueError, r"^x: address 0x7f0000000001 is not a multiple of its element size "
           r"\(2 bytes\)", call_rmsnorm, x=FakeArray((4, 128), ptr=0x7F00_0000_0001))
    raises(ValueError, r"^weight: on cuda:1, x on cuda:0 \(one device per call\)", call_rmsnorm,
           weight=FakeArray((128,), ptr=0x7F00_0002_0000, device_id=1))


def test_outputs_and_streams():
    raises(ValueError, r"^out: ktune allocates outputs for torch and CuPy tensors only; pass "
           r"out= for fake_dlpack inputs", call_rmsnorm, out=None)
    raises(ValueError, r"^stream: x comes from fake_dlpack, whose current stream ktune cannot "
           r"read; pass stream=", call_rmsnorm, stream=None)
    raises(TypeError, r"^stream: expected a CUstream handle \(int\) or a torch/CuPy stream, got "
           r"str", call_rmsnorm, stream="default")
    raises(ValueError, r"^activation: 'gelu' is not one of gelu_tanh, gelu_erf, silu, relu",
           ktune.bias_act, FakeArray((2, 8)), FakeArray((8,)), "gelu")
    raises(ValueError, r"^residual_out: given without residual", ktune.layernorm,
           FakeArray((2, 8)), FakeArray((8,)), FakeArray((8,)),
           residual_out=FakeArray((2, 8)))


@pytest.mark.skipif(has_cuda_driver(), reason="a CUDA driver is present: fake addresses must "
                    "not reach a GPU (the no-GPU error is a CPU-machine test)")
def test_no_gpu_is_one_runtime_error_at_the_first_call():
    for call in (call_rmsnorm,
                 lambda: ktune.softmax(FakeArray((2, 8)),
                                       out=FakeArray((2, 8), ptr=0x7F00_0003_0000), stream=0)):
        err = raises(RuntimeError, r"", call)
        assert isinstance(err, ktune.KtuneError)
        assert err.status_name == "no_device", str(err)
        assert str(err)
    err = raises(RuntimeError, r"", ktune.query, "add_rmsnorm", m=16, n=4096)
    assert err.status_name == "no_device"


def test_configure_and_report_with_a_recorded_database(tmp_path):
    shipped = ROOT / "db" / "shipped" / "h100.db"
    db = tmp_path / "recorded.db"
    shutil.copyfile(shipped, db)
    ktune.configure(db=db, shipped=False)
    report = ktune.runtime_report()
    assert str(db) in report, report
    missing = tmp_path / "none.db"
    ktune.configure(db=missing, shipped=False)
    report = ktune.runtime_report()
    assert str(missing) in report, report
    assert str(db) not in report
    assert not missing.exists()  # reading never creates the user database
    ktune.configure()


def test_the_packaged_command(tmp_path):
    # devices(): an empty list without a driver (never an exception for that).
    found = ktune.devices()
    assert isinstance(found, list)
    if not has_cuda_driver():
        assert found == []
        with pytest.raises(RuntimeError) as info:
            ktune.sweep("add_rmsnorm", {"m": 64, "n": 256}, db=tmp_path / "t.db",
                        progress=False)
        assert "ktune sweep failed" in str(info.value)
        assert re.search(r"CUDA|cuda|driver|device", str(info.value)), str(info.value)
    # A configuration of one's own is checked before any GPU is looked for.
    with pytest.raises(RuntimeError) as info:
        ktune.sweep("add_rmsnorm", {"m": 64, "n": 256}, db=tmp_path / "t.db",
                    params=[{"vec": 4}, "vec=3"], progress=False)
    assert 'invalid parameters "vec=3" for add_rmsnorm: vec=3 is not one of 1, 2, 4, 8' in \
        str(info.value), str(info.value)
    assert not (tmp_path / "t.db").exists()


ATTENTION_ARGS = dict(
    q=FakeArray((2, 8, 1, 128)), k=FakeArray((2, 2, 1000, 128), ptr=0x7F00_1000_0000),
    v=FakeArray((2, 2, 1000, 128), ptr=0x7F00_2000_0000),
    out=FakeArray((2, 8, 1, 128), ptr=0x7F00_3000_0000), stream=0)


def call_attention(**change):
    return call_with(ktune.flash_attention, ("q", "k", "v"), ATTENTION_ARGS, change)


def test_attention_checks():
    raises(ValueError, r"^q: shape \(2, 8, 128\) has 3 dims; q \[b, hq, nq, d\] takes 4",
           call_attention, q=FakeArray((2, 8, 128)))
    raises(ValueError, r"^v: shape \(2, 2, 999, 128\), expected \(2, 2, 1000, 128\) \(like k\)",
           call_attention, v=FakeArray((2, 2, 999, 128), ptr=0x7F00_2000_0000))
    raises(ValueError, r"^q: 8 query heads are not a multiple of k's 3 KV heads", call_attention,
           k=FakeArray((2, 3, 1000, 128), ptr=0x7F00_1000_0000),
           v=FakeArray((2, 3, 1000, 128), ptr=0x7F00_2000_0000))
    raises(ValueError, r"^k: last-dim stride 2 \(shape \(2, 2, 1000, 128\)\); the head dim must "
           r"be contiguous", call_attention,
           k=FakeArray((2, 2, 1000, 128), ptr=0x7F00_1000_0000, strides=(512000, 256000, 256, 2)))
    raises(TypeError, r"^seq_lens: dtype fp32 is not supported here \(allowed: int32\)",
           call_attention, k=FakeArray((20, 16, 2, 128), ptr=0x7F00_1000_0000),
           v=FakeArray((20, 16, 2, 128), ptr=0x7F00_2000_0000),
           block_table=FakeArray((2, 10), dtype="int32", ptr=0x7F00_4000_0000),
           seq_lens=FakeArray((2,), dtype="fp32", ptr=0x7F00_5000_0000))
    raises(ValueError, r"^seq_lens: paged K/V \(block_table given\) needs seq_lens",
           call_attention, block_table=FakeArray((2, 10), dtype="int32"))
    raises(ValueError, r"^max_seqlen_q: varlen batches need", call_attention,
           q=FakeArray((7, 8, 128)), k=FakeArray((90, 2, 128), ptr=0x7F00_1000_0000),
           v=FakeArray((90, 2, 128), ptr=0x7F00_2000_0000), out=FakeArray((7, 8, 128)),
           cu_seqlens_q=FakeArray((3,), dtype="int32"),
           cu_seqlens_k=FakeArray((3,), dtype="int32", ptr=0x7F00_6000_0000))
    raises(TypeError, r"^lse_out: dtype bf16 is not supported here \(allowed: fp32\)",
           call_attention, lse_out=FakeArray((2, 8, 1), ptr=0x7F00_7000_0000))
    raises(ValueError, r"^alibi_slopes: shape \(4,\), expected \(8,\)", call_attention,
           alibi_slopes=FakeArray((4,), dtype="fp32", ptr=0x7F00_8000_0000))
    raises(ValueError, r"^impl: 'fast' is not one of auto, prefill, decode", call_attention,
           impl="fast")


# A paged varlen batch (vLLM's prefill): 4 sequences of 1, 0, 300 and 77 query rows packed
# [378, hq, d], keys in 64-row pages (16 per sequence).
PAGED_VARLEN_ARGS = dict(
    ATTENTION_ARGS, q=FakeArray((378, 8, 128)),
    k=FakeArray((64, 64, 2, 128), ptr=0x7F00_1000_0000),
    v=FakeArray((64, 64, 2, 128), ptr=0x7F00_2000_0000),
    out=FakeArray((378, 8, 128), ptr=0x7F00_3000_0000),
    block_table=FakeArray((4, 16), dtype="int32", ptr=0x7F00_4000_0000),
    seq_lens=FakeArray((4,), dtype="int32", ptr=0x7F00_5000_0000),
    cu_seqlens_q=FakeArray((5,), dtype="int32", ptr=0x7F00_6000_0000), max_seqlen_q=300)


def call_paged_varlen(**change):
    return call_with(ktune.flash_attention, ("q", "k", "v"), PAGED_VARLEN_ARGS, change)


def test_attention_paged_varlen_checks():
    cu_k = FakeArray((5,), dtype="int32", ptr=0x7F00_7000_0000)
    raises(ValueError, r"^max_seqlen_q: a paged varlen batch \(block_table with cu_seqlens_q\) "
           r"needs max_seqlen_q", call_paged_varlen, max_seqlen_q=None)
    # The keys of a paged batch are seq_lens: cu_seqlens_k is refused, with or without
    # cu_seqlens_q; max_seqlen_k (vLLM passes it) must fit the block table.
    for change in ({"cu_seqlens_k": cu_k}, {"cu_seqlens_k": cu_k, "max_seqlen_k": 1000},
                   {"cu_seqlens_q": None, "max_seqlen_q": None, "cu_seqlens_k": cu_k,
                    "q": FakeArray((4, 8, 1, 128)),
                    "out": FakeArray((4, 8, 1, 128), ptr=0x7F00_3000_0000)}):
        raises(ValueError, r"^cu_seqlens_k: paged K/V \(block_table given\) take no "
               r"cu_seqlens_k; seq_lens gives each sequence's keys \(a paged varlen batch "
               r"passes cu_seqlens_q and max_seqlen_q alone\)", call_paged_varlen, **change)
    raises(ValueError, r"^max_seqlen_k: 1025 keys; a block table of 16 pages of 64 holds "
           r"1\.\.1024", call_paged_varlen, max_seqlen_k=1025)
    raises(ValueError, r"^seq_lens: paged K/V \(block_table given\) needs seq_lens",
           call_paged_varlen, seq_lens=None)
    raises(ValueError, r"^seq_lens: given without block_table", call_paged_varlen,
           block_table=None)
    # Shapes: q and out packed [total_q, hq, d], b from cu_seqlens_q, lse [hq, total_q].
    raises(ValueError, r"^q: shape \(4, 8, 300, 128\) has 4 dims; paged varlen q \[total_q, hq, "
           r"d\] takes 3", call_paged_varlen, q=FakeArray((4, 8, 300, 128)))
    raises(ValueError, r"^cu_seqlens_q: shape \(1,\); expected \[b \+ 1\] with b >= 1",
           call_paged_varlen, cu_seqlens_q=FakeArray((1,), dtype="int32", ptr=0x7F00_6000_0000))
    raises(TypeError, r"^cu_seqlens_q: dtype fp32 is not supported here \(allowed: int32\)",
           call_paged_varlen, cu_seqlens_q=FakeArray((5,), dtype="fp32", ptr=0x7F00_6000_0000))
    raises(ValueError, r"^block_table: shape \(3, 16\); expected \[b=4, pages_per_seq\] \(b "
           r"\+ 1 = len\(cu_seqlens_q\)\)", call_paged_varlen,
           block_table=FakeArray((3, 16), dtype="int32", ptr=0x7F00_4000_0000))
    raises(ValueError, r"^seq_lens: shape \(3,\), expected \(4,\) \(\[b\]\)", call_paged_varlen,
           seq_lens=FakeArray((3,), dtype="int32", ptr=0x7F00_5000_0000))
    raises(ValueError, r"^k: shape \(4096, 2, 128\) has 3 dims; a page pool "
           r"\[pages, page_size, hkv, d\] takes 4", call_paged_varlen,
           k=FakeArray((4096, 2, 128), ptr=0x7F00_1000_0000),
           v=FakeArray((4096, 2, 128), ptr=0x7F00_2000_0000))
    raises(ValueError, r"^v: strides .* are not contiguous", call_paged_varlen,
           v=FakeArray((64, 64, 2, 128), ptr=0x7F00_2000_0000,
                       strides=(64 * 4 * 128, 4 * 128, 128, 1)))
    raises(ValueError, r"^k: head dim 64 differs from q's 128", call_paged_varlen,
           k=FakeArray((64, 64, 2, 64), ptr=0x7F00_1000_0000),
           v=FakeArray((64, 64, 2, 64), ptr=0x7F00_2000_0000))
    raises(ValueError, r"^out: shape \(4, 8, 300, 128\), expected \(378, 8, 128\) \(like q\)",
           call_paged_varlen, out=FakeArray((4, 8, 300, 128), ptr=0x7F00_3000_0000))
    raises(ValueError, r"^lse_out: shape \(4, 8, 300\), expected \(8, 378\)", call_paged_varlen,
           lse_out=FakeArray((4, 8, 300), dtype="fp32", ptr=0x7F00_7000_0000))


def test_attention_paged_varlen_reaches_the_binding(monkeypatch):
    """What the extension receives for a paged varlen batch: q and o's strides as varlen's
    (batch 0, head, row; q a view of a fused qkv projection), the pools' 0, nq the longest query
    length and nk pages_per_seq * page_size, page_size, block_table, seq_lens and cu_seqlens_q
    set, cu_seqlens_k null."""
    calls = []
    monkeypatch.setattr(ktune._attention, "_ktune", type("Stub", (), {"attention": staticmethod(
        lambda *args: calls.append(args) or 0)}))
    q = FakeArray((378, 8, 128), strides=(3 * 8 * 128, 128, 1))
    lse = FakeArray((8, 378), dtype="fp32", ptr=0x7F00_8000_0000)
    o, got_lse = call_paged_varlen(q=q, causal=True, return_lse=True, lse_out=lse)
    assert o is PAGED_VARLEN_ARGS["out"] and got_lse is lse
    (args,) = calls
    assert args[:5] == (q.ptr, 0x7F00_1000_0000, 0x7F00_2000_0000, 0x7F00_3000_0000,
                        0x7F00_8000_0000), args
    assert args[5:11] == (4, 8, 2, 300, 16 * 64, 128), args  # b, hq, hkv, nq, nk, d
    assert args[11] == [0, 128, 3 * 8 * 128] + [0] * 6 + [0, 128, 8 * 128], args
    assert args[12] == 1, args  # causal
    # page_size, block_table, seq_lens, cu_seqlens_q, cu_seqlens_k
    assert args[17:22] == (64, 0x7F00_4000_0000, 0x7F00_5000_0000, 0x7F00_6000_0000, 0), args
    assert args[23] == 0, args  # impl auto


@pytest.mark.skipif(has_cuda_driver(), reason="a CUDA driver is present: fake addresses must "
                    "not reach a GPU")
def test_attention_without_gpu_reaches_the_c_api():
    # Batched (with a [b, s, h, d] view's strides), paged and varlen calls pass every check.
    q_bshd = FakeArray((2, 8, 5, 128), strides=(5 * 8 * 128, 128, 8 * 128, 1))
    for change in ({}, {"q": q_bshd, "out": FakeArray((2, 8, 5, 128), ptr=0x7F00_3000_0000)},
                   {"k": FakeArray((20, 16, 2, 128), ptr=0x7F00_1000_0000),
                    "v": FakeArray((20, 16, 2, 128), ptr=0x7F00_2000_0000),
                    "block_table": FakeArray((2, 10), dtype="int32", ptr=0x7F00_4000_0000),
                    "seq_lens": FakeArray((2,), dtype="int32", ptr=0x7F00_5000_0000)},
                   {"q": FakeArray((7, 8, 128)), "k": FakeArray((90, 2, 128), ptr=0x7F00_1000_0000),
                    "v": FakeArray((90, 2, 128), ptr=0x7F00_2000_0000),
                    "out": FakeArray((7, 8, 128), ptr=0x7F00_3000_0000),
                    "cu_seqlens_q": FakeArray((3,), dtype="int32", ptr=0x7F00_4000_0000),
                    "cu_seqlens_k": FakeArray((3,), dtype="int32", ptr=0x7F00_5000_0000),
                    "max_seqlen_q": 4, "max_seqlen_k": 50, "return_lse": True,
                    "lse_out": FakeArray((8, 7), dtype="fp32", ptr=0x7F00_6000_0000)}):
        err = raises(RuntimeError, r"", call_attention, **change)
        assert err.status_name == "no_device", (change.keys(), str(err))
    # A paged varlen batch (prefill, automatic or asked for), causal, with the lse.
    for change in ({}, {"impl": "prefill", "causal": True, "return_lse": True,
                        "lse_out": FakeArray((8, 378), dtype="fp32", ptr=0x7F00_7000_0000)}):
        err = raises(RuntimeError, r"", call_paged_varlen, **change)
        assert err.status_name == "no_device", (change.keys(), str(err))


def fp8(shape, ptr):
    return FakeArray(shape, dtype="e4m3", ptr=ptr)


FP8_ARGS = dict(q=fp8((2, 8, 1, 128), 0x7F00_0000_0000), k=fp8((2, 2, 1000, 128), 0x7F00_1000_0000),
                v=fp8((2, 2, 1000, 128), 0x7F00_2000_0000))


def test_attention_e4m3_checks():
    raises(TypeError, r"^k: dtype bf16 differs from q's e4m3 \(every tensor of the call has one "
           r"dtype\)", call_attention, **dict(FP8_ARGS, k=ATTENTION_ARGS["k"]))
    raises(TypeError, r"^k: dtype e4m3 differs from q's bf16", call_attention,
           k=FP8_ARGS["k"], v=FP8_ARGS["v"])
    # o of e4m3 inputs is bf16: out of any other dtype (q's included) is refused.
    for dtype in ("fp16", "e4m3"):
        raises(TypeError, rf"^out: dtype {dtype} is not supported with e4m3 q, k, v \(allowed: "
               r"bf16", call_attention,
               **dict(FP8_ARGS, out=FakeArray((2, 8, 1, 128), dtype=dtype, ptr=0x7F00_3000_0000)))
    # A bf16 call's out stays like q.
    raises(TypeError, r"^out: dtype fp16 differs from q's bf16", call_attention,
           out=FakeArray((2, 8, 1, 128), dtype="fp16", ptr=0x7F00_3000_0000))


def test_attention_scales_reach_the_runtime():
    # The runtime checks the dequantisation scales before it needs a GPU.
    raises(ktune.KtuneValueError, r"^attention: q_scale=0.5 dequantises e4m3 inputs; with dtype "
           r"bf16 it must be 1", call_attention, q_scale=0.5)
    raises(ktune.KtuneValueError, r"^attention: v_scale=0 must be a positive finite scale",
           call_attention, **FP8_ARGS, v_scale=0.0)
    # Paged K/V take no e4m3 (neither decode nor prefill), dense or packed queries.
    pools = dict(k=fp8((64, 16, 2, 128), 0x7F00_1000_0000),
                 v=fp8((64, 16, 2, 128), 0x7F00_2000_0000))
    paged_e4m3 = r"^attention: dtype e4m3 with page_size=16: paged K/V take bf16 or fp16"
    raises(ktune.KtuneValueError, paged_e4m3, call_attention, **dict(FP8_ARGS, **pools),
           block_table=FakeArray((2, 10), dtype="int32", ptr=0x7F00_4000_0000),
           seq_lens=FakeArray((2,), dtype="int32", ptr=0x7F00_5000_0000))
    raises(ktune.KtuneValueError, paged_e4m3, call_paged_varlen, **pools,
           q=fp8((378, 8, 128), 0x7F00_0000_0000))


@pytest.mark.skipif(has_cuda_driver(), reason="a CUDA driver is present: fake addresses must "
                    "not reach a GPU")
def test_attention_e4m3_without_gpu_reaches_the_c_api():
    # One query row (automatic: prefill, as decode takes no e4m3), scales, the lse.
    for change in ({}, {"q_scale": 0.25, "k_scale": 0.25, "v_scale": 0.5},
                   {"q": fp8((2, 8, 300, 128), 0x7F00_0000_0000),
                    "out": FakeArray((2, 8, 300, 128), ptr=0x7F00_3000_0000), "causal": True,
                    "return_lse": True,
                    "lse_out": FakeArray((2, 8, 300), dtype="fp32", ptr=0x7F00_6000_0000)}):
        err = raises(RuntimeError, r"", call_attention, **dict(FP8_ARGS, **change))
        assert err.status_name == "no_device", (change.keys(), str(err))


MOE_ARGS = dict(
    x=FakeArray((37, 256)), w1=FakeArray((8, 256, 256), ptr=0x7F00_1000_0000),
    w2=FakeArray((8, 256, 128), ptr=0x7F00_2000_0000),
    logits=FakeArray((37, 8), dtype="fp32", ptr=0x7F00_3000_0000), k=2,
    out=FakeArray((37, 256), ptr=0x7F00_4000_0000), stream=0)


def call_moe(**change):
    return call_with(ktune.moe, ("x", "w1", "w2"), MOE_ARGS, change)


def test_moe_checks():
    raises(ValueError, r"^w2: shape \(8, 256, 64\), expected \(8, 256, 128\) \(\[e, h, i\]",
           call_moe, w2=FakeArray((8, 256, 64), ptr=0x7F00_2000_0000))
    raises(ValueError, r"^w1: shape \(8, 256, 100\); expected \[e, 2i, h=256\]", call_moe,
           w1=FakeArray((8, 256, 100), ptr=0x7F00_1000_0000))
    raises(TypeError, r"^logits: dtype bf16 is not supported here \(allowed: fp32\)", call_moe,
           logits=FakeArray((37, 8), ptr=0x7F00_3000_0000))
    raises(ValueError, r"^logits: shape \(37, 9\), expected \(37, 8\)", call_moe,
           logits=FakeArray((37, 9), dtype="fp32", ptr=0x7F00_3000_0000))
    raises(ValueError, r"^k: routed modes need k", call_moe, k=None)
    raises(ValueError, r"^routing: 'top2' is not one of softmax, softmax_renorm", call_moe,
           routing="top2")
    raises(ValueError, r"^topk_ids: precomputed routing needs topk_ids", call_moe, logits=None,
           topk_weights=FakeArray((37, 2), dtype="fp32"))
    raises(ValueError, r"^logits: given with precomputed top-k", call_moe,
           topk_ids=FakeArray((37, 2), dtype="int32", ptr=0x7F00_5000_0000),
           topk_weights=FakeArray((37, 2), dtype="fp32", ptr=0x7F00_6000_0000))
    raises(ValueError, r"^correction_bias: only sigmoid_group routing takes it", call_moe,
           correction_bias=FakeArray((8,), dtype="fp32", ptr=0x7F00_7000_0000))
    raises(ValueError, r"^x: address 0x7f0000000008 is not 16-byte aligned", call_moe,
           x=FakeArray((37, 256), ptr=0x7F00_0000_0008))
    raises(ValueError, r"^topk_ids: shape \(37, 2\), expected \(37, 3\)", call_moe, logits=None,
           k=3, topk_ids=FakeArray((37, 2), dtype="int32", ptr=0x7F00_5000_0000),
           topk_weights=FakeArray((37, 3), dtype="fp32", ptr=0x7F00_6000_0000))


@pytest.mark.skipif(has_cuda_driver(), reason="a CUDA driver is present: fake addresses must "
                    "not reach a GPU")
def test_moe_without_gpu_reaches_the_c_api():
    for change in ({}, {"routing": "sigmoid_group", "n_group": 4, "topk_group": 2,
                        "correction_bias": FakeArray((8,), dtype="fp32", ptr=0x7F00_7000_0000)},
                   {"logits": None, "topk_ids": FakeArray((37, 2), dtype="int32",
                                                          ptr=0x7F00_5000_0000),
                    "topk_weights": FakeArray((37, 2), dtype="fp32", ptr=0x7F00_6000_0000)}):
        err = raises(RuntimeError, r"", call_moe, **change)
        assert err.status_name == "no_device", str(err)


# FP8 weights: w1 and w2 in e4m3 with fp32 scales per row (w1 [e, 2i], w2 [e, h]); x, y bf16.
FP8_MOE = dict(w1=fp8((8, 256, 256), 0x7F00_1000_0000), w2=fp8((8, 256, 128), 0x7F00_2000_0000),
               w1_scale=FakeArray((8, 256), dtype="fp32", ptr=0x7F00_8000_0000),
               w2_scale=FakeArray((8, 256), dtype="fp32", ptr=0x7F00_9000_0000))


def call_moe_e4m3(**change):
    return call_moe(**dict(FP8_MOE, **change))


def test_moe_e4m3_dtypes():
    raises(TypeError, r"^w2: dtype bf16 differs from w1's e4m3 \(w1 and w2 have one dtype: "
           r"bf16, fp16 or e4m3\)", call_moe_e4m3, w2=MOE_ARGS["w2"])
    raises(TypeError, r"^w2: dtype e4m3 differs from w1's bf16", call_moe, w2=FP8_MOE["w2"])
    # x (and y) bf16 under e4m3 weights: fp16 refused, e4m3 x refused with any weights.
    raises(TypeError, r"^x: dtype fp16 is not supported with e4m3 weights \(allowed: bf16; y "
           r"is bf16 too\)", call_moe_e4m3, x=FakeArray((37, 256), dtype="fp16"),
           out=FakeArray((37, 256), dtype="fp16", ptr=0x7F00_4000_0000))
    for weights in (FP8_MOE, {}):
        raises(TypeError, r"^x: dtype e4m3 is not supported \(allowed: bf16, fp16; FP8 MoE takes "
               r"e4m3 weights", call_moe, **dict(weights, x=fp8((37, 256), 0x7F00_0000_0000)))
    for dtype in ("fp16", "e4m3"):
        raises(TypeError, rf"^out: dtype {dtype} is not supported with e4m3 weights \(allowed: "
               r"bf16, the output dtype of FP8 MoE\)", call_moe_e4m3,
               out=FakeArray((37, 256), dtype=dtype, ptr=0x7F00_4000_0000))
    raises(TypeError, r"^w1: a tensor in cpu memory", call_moe_e4m3,
           w1=FakeArray((8, 256, 256), dtype="e4m3", ptr=0x7F00_1000_0000, device_type=CPU))
    raises(ValueError, r"^w1: on cuda:1, x on cuda:0 \(one device per call\)", call_moe_e4m3,
           w1=FakeArray((8, 256, 256), dtype="e4m3", ptr=0x7F00_1000_0000, device_id=1),
           w2=FakeArray((8, 256, 128), dtype="e4m3", ptr=0x7F00_2000_0000, device_id=1))
    raises(ValueError, r"^w2: address 0x7f0020000008 is not 16-byte aligned", call_moe_e4m3,
           w2=fp8((8, 256, 128), 0x7F00_2000_0008))


def test_moe_e4m3_scales():
    for name, dims, w in (("w1_scale", r"\[e, 2i\]", "w1"), ("w2_scale", r"\[e, h\]", "w2")):
        raises(ValueError, rf"^{name}: e4m3 weights need {name}, fp32 {dims} \(one "
               rf"dequantisation scale per {w} row: real row = stored row \* scale\)",
               call_moe_e4m3, **{name: None})
        # 16-bit weights take no scales.
        scale = FP8_MOE[name]
        raises(ValueError, rf"^{name}: given with bf16 weights; only e4m3 \(float8_e4m3fn\) "
               r"weights take dequantisation scales \(pass None\)", call_moe, **{name: scale})
        raises(ValueError, rf"^{name}: given with fp16 weights", call_moe,
               **{n: FakeArray(a.shape, dtype="fp16", ptr=a.ptr) for n, a in MOE_ARGS.items()
                  if n in ("x", "w1", "w2", "out")}, **{name: scale})
        raises(ValueError, rf"^{name}: shape \(8, 128\), expected \(8, 256\) \(fp32 {dims}: one "
               rf"scale per {w} row\)", call_moe_e4m3,
               **{name: FakeArray((8, 128), dtype="fp32", ptr=scale.ptr)})
        raises(ValueError, rf"^{name}: shape \(2048,\), expected \(8, 256\)", call_moe_e4m3,
               **{name: FakeArray((2048,), dtype="fp32", ptr=scale.ptr)})
        for dtype in ("bf16", "e4m3"):
            raises(TypeError, rf"^{name}: dtype {dtype} is not supported here \(allowed: fp32\)",
                   call_moe_e4m3, **{name: FakeArray((8, 256), dtype=dtype, ptr=scale.ptr)})
        raises(TypeError, rf"^{name}: a tensor in cpu memory; ktune runs on CUDA device memory",
               call_moe_e4m3, **{name: FakeArray((8, 256), dtype="fp32", device_type=CPU)})
        raises(ValueError, rf"^{name}: on cuda:1, x on cuda:0 \(one device per call\)",
               call_moe_e4m3,
               **{name: FakeArray((8, 256), dtype="fp32", ptr=scale.ptr, device_id=1)})
        # Every other row of a [16, 256] tensor; a 4-byte offset.
        raises(ValueError, rf"^{name}: strides \(512, 1\) for shape \(8, 256\) are not "
               r"contiguous", call_moe_e4m3,
               **{name: FakeArray((8, 256), dtype="fp32", ptr=scale.ptr, strides=(512, 1))})
        raises(ValueError, rf"^{name}: address {scale.ptr + 4:#x} is not 16-byte aligned",
               call_moe_e4m3, **{name: FakeArray((8, 256), dtype="fp32", ptr=scale.ptr + 4)})


def test_moe_dtype_reaches_the_binding(monkeypatch):
    """The C dtype and the scales' addresses as the extension receives them: bf16 (2) and fp16
    (1) with null scales, e4m3 (4) with both."""
    calls = []
    monkeypatch.setattr(ktune._moe, "_ktune", type("Stub", (), {"moe": staticmethod(
        lambda *args: calls.append(args) or 0)}))
    fp16 = {n: FakeArray(a.shape, dtype="fp16", ptr=a.ptr) for n, a in MOE_ARGS.items()
            if n in ("x", "w1", "w2", "out")}
    precomputed = dict(logits=None, topk_ids=FakeArray((37, 2), dtype="int32",
                                                       ptr=0x7F00_5000_0000),
                       topk_weights=FakeArray((37, 2), dtype="fp32", ptr=0x7F00_6000_0000))
    for change, dtype, scales in (({}, 2, (0, 0)), (fp16, 1, (0, 0)),
                                  (FP8_MOE, 4, (0x7F00_8000_0000, 0x7F00_9000_0000)),
                                  (dict(FP8_MOE, **precomputed), 4,
                                   (0x7F00_8000_0000, 0x7F00_9000_0000))):
        calls.clear()
        assert call_moe(**change) is change.get("out", MOE_ARGS["out"])
        (args,) = calls
        assert args[5:8] == (0x7F00_1000_0000, 0x7F00_2000_0000, 0x7F00_4000_0000), args
        assert args[10:15] == (8, 2, 256, 128, 37), args  # e, k, h, i, t
        assert args[19] == dtype and args[21:] == scales, args


def test_moe_binding_passes_the_scales_to_the_runtime():
    """The extension's scale arguments land in ktune_moe_args: the runtime refuses e4m3 without
    them and bf16 with them, before it needs a GPU."""
    def call(dtype, w1_scale, w2_scale):
        base = 0x7F00_0000_0000
        return ktune._ktune.moe(base, base + 0x3000_0000, 0, 0, 0, base + 0x1000_0000,
                                base + 0x2000_0000, base + 0x4000_0000, 0, 0, 8, 2, 256, 128, 37,
                                1, 1, 1, 1.0, dtype, 0, w1_scale, w2_scale)

    for dtype, scales, pattern in (
            (4, (0, 0x7F00_9000_0000), r"^moe: w1_scale is null, but dtype e4m3 needs it"),
            (4, (0x7F00_8000_0000, 0), r"^moe: w2_scale is null, but dtype e4m3 needs it"),
            (2, (0x7F00_8000_0000, 0), r"^moe: w1_scale is set, but dtype bf16 does not use it"),
            (1, (0, 0x7F00_9000_0000), r"^moe: w2_scale is set, but dtype fp16 does not use it")):
        status = call(dtype, *scales)
        assert status == 1, (status, ktune._ktune.last_error())  # KTUNE_ERROR_INVALID_ARGUMENT
        assert re.search(pattern, ktune._ktune.last_error()), ktune._ktune.last_error()


@pytest.mark.skipif(has_cuda_driver(), reason="a CUDA driver is present: fake addresses must "
                    "not reach a GPU")
def test_moe_e4m3_without_gpu_reaches_the_c_api():
    # The runtime takes dtype e4m3 with both scales (it refuses either missing before it looks
    # for a device): each routing kind, allocated outputs of the routing.
    for change in ({}, {"routing": "sigmoid_group", "n_group": 4, "topk_group": 2,
                        "correction_bias": FakeArray((8,), dtype="fp32", ptr=0x7F00_7000_0000)},
                   {"logits": None, "topk_ids": FakeArray((37, 2), dtype="int32",
                                                          ptr=0x7F00_5000_0000),
                    "topk_weights": FakeArray((37, 2), dtype="fp32", ptr=0x7F00_6000_0000)}):
        err = raises(RuntimeError, r"", call_moe_e4m3, **change)
        assert err.status_name == "no_device", str(err)


def test_query_a_recorded_database_without_gpu(tmp_path):
    # The shipped H100 rows, answered for that GPU by name from a recorded copy of them. The
    # copy drops the trials `ktune db ship` keeps, so that the nearest row serves a neighbour
    # whatever its gain over the default was in its sweep (kNeighbourMinGain: the C++ tests).
    db = tmp_path / "recorded.db"
    shutil.copyfile(ROOT / "db" / "shipped" / "h100.db", db)
    with sqlite3.connect(db) as con:
        con.execute("UPDATE best SET trial_id = NULL")
        con.execute("DELETE FROM trials")
    h100 = "NVIDIA H100 80GB HBM3|cc9.0|132sm|81079MiB"
    try:
        ktune.configure(db=db, shipped=False)
        exact = ktune.query("flash_attention", device=h100, b=2, hq=16, hkv=16, nq=4096,
                            nk=4096, d=128)
        assert exact["match"] == "exact", exact
        assert exact["params"]["block_m"] == 128 and exact["database"] == str(db), exact
        near = ktune.query("flash_attention", device=h100, b=2, hq=16, hkv=16, nq=4000,
                           nk=4000, d=128)
        assert near["match"] == "nearest_shape", near
        assert near["tuned_problem"].startswith("b=2,hq=16,hkv=16,nq=4096"), near
        # Nothing tuned for this head dim: the built-in default, never a D=128 row.
        other = ktune.query("flash_attention", device=h100, b=2, hq=16, hkv=16, nq=4096,
                            nk=4096, d=256)
        assert other["match"] == "default", other
        raises(ValueError, r"d=84", ktune.query, "flash_attention", device=h100, b=1, hq=8,
               hkv=8, nq=64, nk=64, d=84)
        raises(ValueError, r"^dtype: 'fp32' is not one of bf16, fp16", ktune.query,
               "softmax", "fp32", device=h100, m=4, n=8)
    finally:
        ktune.configure()


def test_integer_and_flag_arguments_are_checked_not_coerced():
    # Floats were truncated (window=2.7 -> 2), strings parsed, huge ints left to the binding's
    # "incompatible function arguments" dump that names no argument (review of stop 77).
    raises(TypeError, r"^window: 2\.7 \(float\) is not an integer", call_attention, window=2.7)
    raises(ValueError, r"^window=1180591620717411303424 is out of range", call_attention,
           window=2**70)
    raises(TypeError, r"^causal: 'no' \(str\) is not True or False", call_attention,
           causal="no")
    raises(TypeError, r"^stream: expected a CUstream handle", call_attention, stream=1.5)
    raises(ValueError, r"^stream=-1 is out of range", call_attention, stream=-1)
    raises(TypeError, r"^k: 2\.5 \(float\) is not an integer", call_moe, k=2.5)
    raises(ValueError, r"^k=1180591620717411303424 is out of range", call_moe, k=2**70)
    raises(ValueError, r"^routing: \[\] is not one of", call_moe, routing=[])
    raises(ValueError, r"^activation: \[\] is not one of", ktune.bias_act, FakeArray((2, 8)),
           FakeArray((8,)), [])
    # The longest query of a varlen batch is at most its packed rows.
    raises(ValueError, r"^max_seqlen_q=1000000 is out of range \(allowed 1\.\.378\)",
           call_paged_varlen, max_seqlen_q=10**6)


def test_configure_and_query_check_their_arguments(tmp_path):
    raises(TypeError, r"^db: 5 \(int\) is not a path", ktune.configure, db=5)
    raises(TypeError, r"^db: b'/tmp/x\.db' \(bytes\) is not a path", ktune.configure,
           db=b"/tmp/x.db")
    raises(ValueError, r"^query\('add_rmsnorm'\): give the problem's dims", ktune.query,
           "add_rmsnorm", device="NVIDIA H100 80GB HBM3")
    raises(ValueError, r"^op: 'add\\x00rmsnorm' is not an op name", ktune.query,
           "add\0rmsnorm", m=1, n=8)
    raises(TypeError, r"^tokens: '12' is not an integer or a list of integers", ktune.sweep,
           "moe", tokens="12")
    ktune.configure()


def test_a_failed_dlpack_export_says_why():
    class Broken:
        def __dlpack__(self, *args, **kwargs):
            raise RuntimeError("boom")

        def __dlpack_device__(self):
            return (2, 0)

    raises(TypeError, r"^x: Broken could not be read through DLPack \(RuntimeError: boom\)",
           ktune.softmax, Broken(), stream=0)
