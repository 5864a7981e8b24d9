"""The runtime's settings and what it dispatches: configure(), query(), runtime_report(),
reset()."""
import json
import os
import subprocess

from . import _cli, _ktune
from ._errors import check as _check_status
from ._tensors import C_DTYPES, flag

MATCHES = {0: "exact", 1: "nearest_shape", 2: "other_device", 3: "default"}
# What configure() chose, for the answers the packaged command gives (query(device=...)).
_settings = {"db": None, "shipped": True}


def configure(db=None, shipped=True):
    """Chooses the user database (a path; None: $KTUNE_DB or the default location) and whether
    the shipped read-only databases are consulted; drops every plan. Needs no GPU."""
    if db is not None and not isinstance(db, (str, os.PathLike)):
        raise TypeError(f"db: {db!r} ({type(db).__name__}) is not a path (str or os.PathLike)")
    if db is not None:
        db = os.fspath(db)
        if not isinstance(db, str):
            raise TypeError(f"db: {db!r} is a bytes path; pass it as str")
        if "\0" in db:
            raise ValueError(f"db: {db!r} holds a NUL byte")
    shipped = flag(shipped, "shipped")
    _check_status(_ktune.configure(db, shipped))
    _settings.update(db=db, shipped=shipped)


def reset():
    """Drops every plan and the runtime's workspaces; the databases are reopened on the next
    call (after a sweep, say)."""
    _check_status(_ktune.reset())


def runtime_report():
    """What the runtime consults, as text: each database (loaded, missing or refused, and why),
    the queries that failed and the rows lookups skip, and the compile cache. Needs no GPU."""
    status, text = _ktune.runtime_report()
    _check_status(status)
    return text


def _params(text):
    values = {}
    for item in filter(None, text.split(",")):
        key, _, value = item.partition("=")
        values[key] = int(value) if value.lstrip("-").isdigit() else value
    return values


def query(op, dtype="bf16", *, device=None, **shape):
    """What the runtime dispatches for `op` on a problem, e.g. query("add_rmsnorm", m=16384,
    n=4096) -> {"match": "exact" | "nearest_shape" | "other_device" | "default",
    "params": {"threads": 256, ...}}.

    device=None: this process's GPU (plans the problem, as a first call would). device=NAME (a
    GPU name or fingerprint key recorded in the databases, e.g. "NVIDIA H100 80GB HBM3"):
    answered from the databases alone, with no GPU, through the packaged `ktune best` (then
    also "tuned_problem", "tuned_device", "database" and "tuned_us" when a row matched); the
    databases are those configure() chose."""
    if not isinstance(dtype, str) or dtype not in ("bf16", "fp16", "e4m3"):
        raise ValueError(f"dtype: {dtype!r} is not one of bf16, fp16, e4m3")
    if not isinstance(op, str) or "\0" in op:
        raise ValueError(f"op: {op!r} is not an op name (ktune ops lists them)")
    if not shape:
        raise ValueError(f"query({op!r}): give the problem's dims as keywords (e.g. m=16384, "
                         f"n=4096; `ktune ops` lists each op's dims)")

    def value(name, v):  # causal=True reads as causal=yes
        if isinstance(v, bool):
            return "yes" if v else "no"
        if "\0" in str(v):
            raise ValueError(f"{name}: {v!r} holds a NUL byte")
        return v
    text = ",".join(f"{k}={value(k, v)}" for k, v in shape.items())
    if device is None:
        status, match, params = _ktune.query(str(op), text, C_DTYPES[dtype])
        _check_status(status)
        return {"match": MATCHES.get(match, str(match)), "params": _params(params)}
    args = [_cli.command(), "best", "--op", str(op), "--dtype", dtype, "--device", str(device),
            "--json"]
    if text:
        args += ["--shape", text]
    if _settings["db"] is not None:
        args += ["--db", _settings["db"]]
    if not _settings["shipped"]:
        args.append("--no-shipped")
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode != 0:
        message = out.stderr.strip().splitlines()
        raise ValueError(message[-1] if message else f"ktune best failed (exit {out.returncode})")
    result = json.loads(out.stdout)
    result["params"] = _params(result.get("params", ""))
    return result
