"""The runtime's settings and what it dispatches: configure(), query(), runtime_report(),
reset()."""
from . import _ktune
from ._errors import check as _check_status
from ._tensors import C_DTYPES

MATCHES = {0: "exact", 1: "nearest_shape", 2: "other_device", 3: "default"}


def configure(db=None, shipped=True):
    """Chooses the user database (a path; None: $KTUNE_DB or the default location) and whether
    the shipped read-only databases are consulted; drops every plan. Needs no GPU."""
    _check_status(_ktune.configure(None if db is None else str(db), bool(shipped)))


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


def query(op, dtype="bf16", **shape):
    """What the runtime dispatches for `op` on this GPU: e.g. query("add_rmsnorm", m=16384,
    n=4096) -> {"match": "exact" | "nearest_shape" | "other_device" | "default",
    "params": {"threads": 256, ...}}. Plans the problem (needs the GPU)."""
    if dtype not in C_DTYPES:
        raise ValueError(f"dtype: {dtype!r} is not one of {', '.join(C_DTYPES)}")
    text = ",".join(f"{k}={v}" for k, v in shape.items())
    status, match, params = _ktune.query(str(op), text, C_DTYPES[dtype])
    _check_status(status)
    values = {}
    for item in filter(None, params.split(",")):
        key, _, value = item.partition("=")
        values[key] = int(value) if value.lstrip("-").isdigit() else value
    return {"match": MATCHES.get(match, str(match)), "params": values}
