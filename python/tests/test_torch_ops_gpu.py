"""ktune.torch on the GPU: torch.library.opcheck for every op, torch.compile(fullgraph=True) of
a small block giving eager's bits, and CUDA-graph capture and replay of that block. Also that
`import ktune` alone never imports torch (test_package_cpu.py) while ktune.torch registers the
ops as torch.ops.ktune.*. Skipped without torch or a CUDA device."""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device for torch", allow_module_level=True)

import attention_cases  # noqa: E402
import ktune  # noqa: E402
import ktune.torch as kt  # noqa: E402


def rand(shape, dtype=torch.bfloat16):
    return (torch.rand(shape, device="cuda") * 4 - 2).to(dtype)


def moe_weights(e=8, h=1024, inter=256):
    w1 = (rand((e, 2 * inter, h)).float() * 0.05).to(torch.bfloat16)
    w2 = (rand((e, h, inter)).float() * 0.05).to(torch.bfloat16)
    return w1, w2


def attention_layouts(dtype=torch.bfloat16):
    """(paged args, varlen args) for the operators: 3 sequences, GQA 8/2, d=128."""
    kv = attention_cases.sequences([100, 37, 300], 2, 128, dtype)
    kp, vp, table, seq_lens = attention_cases.paged(kv, 16)
    k, v, cu_q, cu_k = attention_cases.packed(kv, 5)
    return ((rand((3, 8, 2, 128), dtype), kp, vp, table, seq_lens),
            (rand((15, 8, 128), dtype), k, v, cu_q, cu_k, 5, 300))


def samples():
    paged, varlen = attention_layouts()
    x, r = rand((37, 1024)), rand((37, 1024))
    w, b = rand((1024,)), rand((1024,))
    w1, w2 = moe_weights()
    logits = torch.randn(37, 8, device="cuda")
    ids = torch.stack([torch.randperm(8, device="cuda")[:2] for _ in range(37)]).int()
    return [
        (kt.flash_attention, (rand((2, 8, 70, 128)), rand((2, 2, 300, 128)),
                              rand((2, 2, 300, 128)), True)),
        (kt.flash_attention_paged, paged),
        (kt.flash_attention_varlen, varlen + (True,)),
        (kt.moe, (x, w1, w2, logits, 2)),
        (kt.moe_topk, (x, w1, w2, ids, torch.rand(37, 2, device="cuda"))),
        (kt.add_rmsnorm, (x, r, w, 1e-6)),
        (kt.layernorm, (x, w, b, 1e-5)),
        (kt.layernorm_residual, (x, r, w, b, 1e-5)),
        (kt.bias_act, (x, b, "silu")),
        (kt.swiglu, (rand((5, 3, 2048), torch.float16),)),
        (kt.softmax, (x, 0.5)),
    ]


@pytest.mark.parametrize("i", range(11))
def test_opcheck(i):
    op, args = samples()[i]
    torch.library.opcheck(op, args)


def test_registered_under_torch_ops():
    x, r, w = rand((4, 256)), rand((4, 256)), rand((256,))
    y, h = torch.ops.ktune.add_rmsnorm(x, r, w, 1e-6)
    y2, h2 = kt.add_rmsnorm(x, r, w, 1e-6)
    assert torch.equal(y, y2) and torch.equal(h, h2)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_attention_operators_match_eager(dtype):
    """The paged and varlen operators give ktune.flash_attention's bits, mask options included."""
    paged, varlen = attention_layouts(dtype)
    slopes = torch.rand(8, device="cuda")
    opts = dict(causal=True, scale=0.07, window=64, softcap=30.0, alibi_slopes=slopes)
    q, kp, vp, table, seq_lens = paged
    want = ktune.flash_attention(q, kp, vp, block_table=table, seq_lens=seq_lens, **opts)
    got = torch.ops.ktune.flash_attention_paged(*paged, **opts)
    torch.testing.assert_close(got, want, atol=0, rtol=0)
    q, k, v, cu_q, cu_k, mq, mk = varlen
    want = ktune.flash_attention(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=mq,
                                 max_seqlen_k=mk, **opts)
    got = kt.flash_attention_varlen(*varlen, **opts)
    torch.testing.assert_close(got, want, atol=0, rtol=0)
    assert not got.isnan().any()


def block(x, r, w, b, q, k, v, w1, w2, logits):
    """attention + add_rmsnorm + MoE (and the other fused ops), as a model layer calls them."""
    a = torch.ops.ktune.flash_attention(q, k, v, True)
    y, h = torch.ops.ktune.add_rmsnorm(x + a.transpose(1, 2).reshape(x.shape), r, w, 1e-6)
    m = torch.ops.ktune.moe(y, w1, w2, logits, 2)
    z = torch.ops.ktune.bias_act(m, b, "gelu_tanh")
    return torch.ops.ktune.softmax(z * 2.0, 1.0), h


def block_args():
    t, hidden = 64, 1024
    w1, w2 = moe_weights(8, hidden, 256)
    return [rand((t, hidden)), rand((t, hidden)), rand((hidden,)), rand((hidden,)),
            rand((1, 8, t, 128)), rand((1, 2, t, 128)), rand((1, 2, t, 128)), w1, w2,
            torch.randn(t, 8, device="cuda")]


def test_compile_fullgraph_matches_eager():
    args = block_args()
    eager = block(*args)
    compiled = torch.compile(block, fullgraph=True)(*args)
    for e, c in zip(eager, compiled):
        torch.testing.assert_close(c, e, atol=0, rtol=0)


def test_cuda_graph_capture_and_replay():
    args = block_args()
    want = block(*args)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            block(*args)  # warm-up: plans and compiles before capture
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = block(*args)
    for replay in range(2):
        for o in out:
            o.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        for o, w in zip(out, want):
            torch.testing.assert_close(o, w, atol=0, rtol=0)
    # New inputs copied into the captured ones: the replay follows them.
    fresh = [rand(a.shape, a.dtype) if a.dtype != torch.float32 else torch.randn_like(a)
             for a in args]
    for a, f in zip(args, fresh):
        a.copy_(f)
    graph.replay()
    torch.cuda.synchronize()
    for o, w in zip(out, block(*fresh)):
        torch.testing.assert_close(o, w, atol=0, rtol=0)
