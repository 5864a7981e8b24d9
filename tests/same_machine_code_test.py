#!/usr/bin/env python3
"""scripts/same_machine_code.py without a GPU: identical trees compare equal and --rehash gives
stale rows the current hash; a change of the code is found and its rows keep their hash; the
database's other ops are left alone. Run by ctest: same_machine_code_test.py KTUNE SOURCE_DIR."""
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

ktune, source = sys.argv[1], sys.argv[2]
script = os.path.join(source, "scripts", "same_machine_code.py")
templates = os.path.join(source, "templates")
failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)
        print("FAILED:", what)


def run(*args):
    r = subprocess.run([sys.executable, script, "--ktune", ktune] + list(args),
                       capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def hashes(db, op):
    con = sqlite3.connect(db)
    rows = {h for t in ("best", "trials")
            for (h,) in con.execute(f"SELECT template_hash FROM {t} WHERE op = ?", (op,))}
    con.close()
    return rows


with tempfile.TemporaryDirectory() as tmp:
    db = os.path.join(tmp, "t.db")
    shutil.copyfile(os.path.join(source, "db", "shipped", "h200.db"), db)
    current = hashes(db, "add_rmsnorm")
    expect(len(current) == 1, f"one add_rmsnorm hash in the shipped file: {current}")
    swiglu = hashes(db, "swiglu")
    con = sqlite3.connect(db)
    with con:
        for t in ("best", "trials"):
            con.execute(f"UPDATE {t} SET template_hash = 'old' WHERE op = 'add_rmsnorm'")
    con.close()

    # The norm kernels with one operation changed: another machine code.
    changed = os.path.join(tmp, "changed")
    shutil.copytree(templates, changed)
    norm = os.path.join(changed, "fused", "norm.cuh")
    text = open(norm).read()
    expect("+ args.eps)" in text, "fused/norm.cuh adds eps (the edit point of this test)")
    open(norm, "w").write(text.replace("+ args.eps)", "+ 2.0f * args.eps)"))

    code, out = run("--before", changed, "--after", templates, "--db", db, "--op", "add_rmsnorm",
                    "--rehash")
    expect(code == 1, f"a changed kernel exits 1 (got {code}):\n{out}")
    expect("DIFFERENT" in out and "add_rmsnorm: not re-hashed" in out, out)
    expect(hashes(db, "add_rmsnorm") == {"old"}, "changed code keeps the stale hash")

    code, out = run("--before", templates, "--after", templates, "--db", db, "--op",
                    "add_rmsnorm", "--rehash")
    expect(code == 0, f"identical trees exit 0 (got {code}):\n{out}")
    expect("DIFFERENT" not in out and " of " in out, out)
    expect("rows re-hashed" in out, out)
    expect(hashes(db, "add_rmsnorm") == current, "unchanged code gets the current hash")
    expect(hashes(db, "swiglu") == swiglu, "another op's rows are left alone")

    code, out = run("--before", os.path.join(tmp, "nowhere"), "--after", templates, "--db", db)
    expect(code != 0 and "not a templates/ folder" in out, out)

print("same_machine_code_test:", "FAILED" if failures else "passed")
sys.exit(1 if failures else 0)
