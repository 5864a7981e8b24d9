"""The runtime's settings and what it dispatches: configure(), query(), runtime_report(),
reset()."""
import json
import subprocess

from . import _cli, _ktune
from ._errors import check as _check_status
from ._tensors import C_DTYPES

MATCHES = {0: "exact", 1: "nearest_shape", 2: "other_device", 3: "default"}
# What configure() chose, for the answers the packaged command gives (query(device=...)).
_settings = {"db": None, "shipped": True}


def configure(db=None, shipped=True):
    """Chooses the user database (a path; None: $KTUNE_DB or the default location) and whether
    the shipped read-only databases are consulted; drops every plan. Needs no GPU."""
    _check_status(_ktune.configure(None if db is None else str(db), bool(shipped)))
    _settings.update(db=None if db is None else str(db), shipped=bool(shipped))


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
    if dtype not in ("bf16", "fp16"):
        raise ValueError(f"dtype: {dtype!r} is not one of bf16, fp16")
    text = ",".join(f"{k}={v}" for k, v in shape.items())
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
