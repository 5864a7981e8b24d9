"""Paged and varlen attention inputs built from per-sequence K/V, for the GPU tests of the eager
function and of the torch operators (the references read the per-sequence tensors)."""
import torch


def rand(shape, dtype):
    return (torch.rand(shape, device="cuda") * 4 - 2).to(dtype)


def sequences(lens, hkv, d, dtype):
    """Per-sequence (k, v), each [hkv, n, d]."""
    return [(rand((hkv, n, d), dtype), rand((hkv, n, d), dtype)) for n in lens]


def paged(kv, page):
    """Page pools [pages, page, hkv, d] holding kv in a shuffled page order (unused slots zero),
    the int32 block table [b, pages_per_seq] and seq_lens [b]."""
    lens = [k.shape[1] for k, _ in kv]
    hkv, d, dtype = kv[0][0].shape[0], kv[0][0].shape[2], kv[0][0].dtype
    b, pps = len(kv), -(-max(lens) // page)
    table = torch.randperm(b * pps, device="cuda").view(b, pps).to(torch.int32)
    kp = torch.zeros((b * pps, page, hkv, d), dtype=dtype, device="cuda")
    vp = torch.zeros_like(kp)
    for i, (kk, vv) in enumerate(kv):
        for j in range(0, lens[i], page):
            pg, n = int(table[i, j // page]), min(page, lens[i] - j)
            kp[pg, :n] = kk[:, j:j + n].transpose(0, 1)
            vp[pg, :n] = vv[:, j:j + n].transpose(0, 1)
    return kp, vp, table, torch.tensor(lens, dtype=torch.int32, device="cuda")


def packed(kv, nq):
    """kv packed for varlen: k and v [total_k, hkv, d], cu_seqlens_q (nq rows per sequence) and
    cu_seqlens_k, int32 [b + 1]."""
    lens = [k.shape[1] for k, _ in kv]
    k = torch.cat([kk.transpose(0, 1) for kk, _ in kv])
    v = torch.cat([vv.transpose(0, 1) for _, vv in kv])
    cu_q = torch.arange(len(kv) + 1, dtype=torch.int32, device="cuda") * nq
    cu_k = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32,
                        device="cuda")
    return k, v, cu_q, cu_k
