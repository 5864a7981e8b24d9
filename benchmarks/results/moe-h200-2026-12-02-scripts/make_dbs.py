#!/usr/bin/env python3
"""How tmp36/p128.db, p192.db, q128.db and q192.db of run2.sh and run3.sh were made (session of
2026-12-02, from repo root): p128.db is call 1's staged-sweep database (persist.sh, Mixtral
T=1024 and 4096) as it came back; p192.db the same with the T=1024 best row pointed at the
fastest block_m=192 trial; q128/q192 the T=4096 row's device and template hash with one fixed
configuration at T=2048 and 4096 (the T=2048 rows were not dispatched: see the results file)."""
import shutil
import sqlite3

shutil.copy("p.db", "p128.db")
shutil.copy("p128.db", "p192.db")
c = sqlite3.connect("p192.db")
r = c.execute("select id, params_key, median_us from trials where problem_key like '%t=1024,%' "
              "and params_key like 'block_m=192%' and status='ok' order by median_us").fetchone()
c.execute("update best set params_key=?, median_us=?, trial_id=? "
          "where problem_key like '%t=1024,%'", (r[1], r[2], r[0]))
c.commit()
P192 = ("block_m=192,bn1=128,bk1=64,warps1=12,warps_m1=1,stages1=3,group1=0,prefetch1=0,epi1=0,"
        "impl1=2,bn2=128,bk2=64,warps2=12,warps_m2=1,stages2=4,group2=8,prefetch2=0,epi2=0,"
        "impl2=2,align_chunk=4096,route_lanes=8,route_vec=4,combine_vec=8,split2=1")
for bm in (128, 192):
    shutil.copy("p128.db", f"q{bm}.db")
    c = sqlite3.connect(f"q{bm}.db")
    cols = [x[1] for x in c.execute("pragma table_info(best)")]
    row = dict(zip(cols, c.execute("select * from best where problem_key like '%t=4096,%'")
                   .fetchone()))
    params = row["params_key"] if bm == 128 else P192
    c.execute("delete from best where problem_key like '%t=1024,%'")
    for t in (2048, 4096):
        new = dict(row, problem_key=row["problem_key"].replace("t=4096,", f"t={t},"),
                   params_key=params)
        c.execute("delete from best where problem_key=?", (new["problem_key"],))
        c.execute(f"insert into best({','.join(cols)}) values({','.join('?' * len(cols))})",
                  [new[k] for k in cols])
    c.commit()
