"""What the package does through its `ktune` command (bin/ktune inside the package): the GPUs
(devices) and tuning (sweep), which run in the command's own processes (the tuner keeps its
worker process apart from the caller's CUDA context)."""
import json
import numbers
import os
import re
import subprocess
import sys

from ._errors import INVALID_ARGUMENT, KtuneValueError

_PROGRESS = re.compile(r"^(?:\[problem (\d+)/(\d+) ([^\]]*)\] )?\[(\d+)/(\d+)\] (.*)$")


def command():
    """The path of the package's `ktune` command."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "ktune")
    if not os.path.exists(path):
        raise FileNotFoundError(f"the ktune command is missing from the package ({path}): "
                                f"reinstall ktune")
    return path


def devices():
    """The CUDA devices the driver shows: a list of dicts (name, compute capability, SMs, memory,
    L2, shared memory, the fingerprint key ktune's databases use). Empty without a driver or GPU;
    never raises for that."""
    out = subprocess.run([command(), "devices", "--json"], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"ktune devices failed: {out.stderr.strip()}")
    return json.loads(out.stdout).get("devices", [])


class _Progress:
    """tqdm when it is installed, else the command's own lines on stderr."""

    def __init__(self, enabled):
        self.enabled = enabled
        self.bar = None
        self.problem = None
        try:
            import tqdm  # noqa: F401
            self.tqdm = tqdm.tqdm if enabled else None
        except ImportError:
            self.tqdm = None

    def line(self, text):
        if not self.enabled:
            return
        m = _PROGRESS.match(text)
        if self.tqdm is None or m is None:
            print(text, file=sys.stderr)
            return
        problem = m.group(3)
        done, total = int(m.group(4)), int(m.group(5))
        if self.bar is None or problem != self.problem or self.bar.total != total:
            if self.bar is not None:
                self.bar.close()
            self.problem = problem
            self.bar = self.tqdm(total=total, desc=problem or "sweep", unit="config")
        self.bar.n = done
        self.bar.set_postfix_str(m.group(6)[-60:], refresh=True)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def _items(value):
    """ "a=1,b=2" as given, or a dict as "a=1,b=2"."""
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in value.items())
    return str(value)


def sweep(op, shape=None, *, dtype="bf16", db=None, strategy=None, budget=None,
          time_limit=None, tokens=None, force=False, device=None, params=None, progress=True):
    """Tunes `op` on a problem (shape: "m=16384,n=4096" or a dict) with the package's `ktune
    sweep`, and returns its result as a dict (the best configuration and its time, the counts
    of every trial status, the space). params: configurations to time beside the default, each
    "name=value,..." or a dict over the default (`ktune sweep --params`; without strategy only
    they and the default are measured, the result's "given" lists them). Progress: a tqdm bar
    when tqdm is installed, the command's lines on stderr otherwise, nothing with
    progress=False. Raises RuntimeError with the command's message when the sweep fails (no GPU
    among the reasons)."""
    args = [command(), "sweep", "--op", str(op), "--dtype", str(dtype), "--json"]
    if shape is not None:
        args += ["--shape", _items(shape)]
    if isinstance(params, (str, dict)):
        params = [params]
    for p in params or []:
        args += ["--params", _items(p)]
    for flag, value in (("--db", db), ("--strategy", strategy), ("--budget", budget),
                        ("--time-limit", time_limit), ("--device", device)):
        if value is not None:
            args += [flag, str(value)]
    if tokens is not None:
        if isinstance(tokens, numbers.Integral) and not isinstance(tokens, bool):
            tokens = [tokens]
        if isinstance(tokens, (str, bytes)) or not all(
                isinstance(t, numbers.Integral) and not isinstance(t, bool) for t in tokens):
            raise TypeError(f"tokens: {tokens!r} is not an integer or a list of integers")
        args += ["--tokens", ",".join(str(int(t)) for t in tokens)]
    if force:
        args.append("--force")
    bar = _Progress(progress)
    tail = []
    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          bufsize=1) as p:
        for text in p.stderr:
            text = text.rstrip("\n")
            tail = (tail + [text])[-20:]
            bar.line(text)
        result = p.stdout.read()
        rc = p.wait()
    bar.close()
    if rc != 0:
        message = f"ktune sweep failed (exit {rc}): " + "\n".join(tail[-5:])
        if rc == 2:  # the command refused an argument: a ValueError (and a RuntimeError)
            raise KtuneValueError(message, INVALID_ARGUMENT)
        raise RuntimeError(message)
    return json.loads(result)
