"""ktune.sweep and ktune.devices on a GPU (no torch needed): a small exhaustive sweep into a
fresh database returns its result as a dict, and the runtime then dispatches the tuned
configuration (query: exact). Skipped without a GPU."""
import pytest

import ktune

if not ktune.devices():
    pytest.skip("no CUDA device (ktune.devices() is empty)", allow_module_level=True)


def test_sweep_then_query(tmp_path, capsys):
    db = tmp_path / "tuned.db"
    result = ktune.sweep("add_rmsnorm", {"m": 64, "n": 1024}, db=db, progress=True)
    assert result["op"] == "add_rmsnorm" and result["problem"] == "m=64,n=1024"
    assert result["best"]["median_us"] > 0 and result["counts"].get("ok", 0) > 0, result
    assert capsys.readouterr().err  # progress went somewhere (tqdm or the command's lines)
    try:
        ktune.configure(db=db)
        got = ktune.query("add_rmsnorm", m=64, n=1024)
        assert got["match"] == "exact", got
        best = dict(kv.split("=") for kv in result["best"]["params"].split(","))
        assert {k: str(v) for k, v in got["params"].items()} == best
    finally:
        ktune.configure()
