"""ktune.torch on the GPU: torch.library.opcheck for every op, torch.compile(fullgraph=True) of
a small block giving eager's bits, and CUDA-graph capture and replay of that block. Also that
`import ktune` alone never imports torch (test_package_cpu.py) while ktune.torch registers the
ops as torch.ops.ktune.*. Skipped without torch or a CUDA device."""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device for torch", allow_module_level=True)

import ktune.torch as kt  # noqa: E402


def rand(shape, dtype=torch.bfloat16):
    return (torch.rand(shape, device="cuda") * 4 - 2).to(dtype)


def samples():
    x, r = rand((37, 1024)), rand((37, 1024))
    w, b = rand((1024,)), rand((1024,))
    return [
        (kt.add_rmsnorm, (x, r, w, 1e-6)),
        (kt.layernorm, (x, w, b, 1e-5)),
        (kt.layernorm_residual, (x, r, w, b, 1e-5)),
        (kt.bias_act, (x, b, "silu")),
        (kt.swiglu, (rand((5, 3, 2048), torch.float16),)),
        (kt.softmax, (x, 0.5)),
    ]


@pytest.mark.parametrize("i", range(6))
def test_opcheck(i):
    op, args = samples()[i]
    torch.library.opcheck(op, args)


def test_registered_under_torch_ops():
    x, r, w = rand((4, 256)), rand((4, 256)), rand((256,))
    y, h = torch.ops.ktune.add_rmsnorm(x, r, w, 1e-6)
    y2, h2 = kt.add_rmsnorm(x, r, w, 1e-6)
    assert torch.equal(y, y2) and torch.equal(h, h2)


def block(x, r, w, b):
    y, h = torch.ops.ktune.add_rmsnorm(x, r, w, 1e-6)
    z = torch.ops.ktune.bias_act(y, b, "gelu_tanh")
    return torch.ops.ktune.softmax(z * 2.0, 1.0), h


def test_compile_fullgraph_matches_eager():
    args = (rand((64, 2048)), rand((64, 2048)), rand((2048,)), rand((2048,)))
    eager = block(*args)
    compiled = torch.compile(block, fullgraph=True)(*args)
    for e, c in zip(eager, compiled):
        torch.testing.assert_close(c, e, atol=0, rtol=0)


def test_cuda_graph_capture_and_replay():
    args = [rand((64, 2048)), rand((64, 2048)), rand((2048,)), rand((2048,))]
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
    fresh = [rand(a.shape) for a in args]
    for a, f in zip(args, fresh):
        a.copy_(f)
    graph.replay()
    torch.cuda.synchronize()
    for o, w in zip(out, block(*fresh)):
        torch.testing.assert_close(o, w, atol=0, rtol=0)
