"""Writes a small tuning database for tuning-db.test.

    tuning-db.py SCHEMA DB KEY.json MODE

KEY.json is tq-aot --print-tuning-target's output. MODE `match`: records
of tq_decode_turbo3_0_turbo3_0_d64_g2 for that key (a best, a slower one,
a faster but wrong one, a failed compile, and one at a larger context);
MODE `other`: the same records under another tqc version and another CPU.
"""
import json
import math
import sqlite3
import sys

schema, path, key_file, mode = sys.argv[1:5]
key = json.load(open(key_file))
db = sqlite3.connect(path)
db.executescript(open(schema).read())

spec = "tq_decode_turbo3_0_turbo3_0_d64_g2"
rows = [  # (context, knobs, status, seconds)
    (1024, {"splits": 2, "tile_size": 128}, "ok", 2.0e-3),
    (1024, {"splits": 1, "tile_size": 64}, "ok", 1.0e-3),
    (1024, {"splits": 8, "tile_size": 32}, "wrong", math.inf),
    (1024, {"splits": 16, "tile_size": 16}, "compile_error", math.inf),
    (4096, {"lookup": "select", "splits": 8, "tile_size": 512}, "ok", 3.0e-3),
]
for context, knobs, status, seconds in rows:
    targets = [(key["tqc_version"], key["cpu"])]
    if mode == "other":
        targets = [("0.0.1", key["cpu"]), (key["tqc_version"], "not-this-cpu")]
    for version, cpu in targets:
        db.execute(
            "INSERT INTO measurements (tqc_version, triple, cpu, "
            "features_hash, features, spec, kind, k_format, v_format, "
            "head_dim, grp, context, knobs, status, seconds, statistic, "
            "rounds, measured_context, created) VALUES "
            "(?, ?, ?, ?, ?, ?, 'decode', 'turbo3_0', 'turbo3_0', 64, 2, ?, "
            "?, ?, ?, 'best', 5, ?, '2026-11-24')",
            (version, key["triple"], cpu, key["features_hash"],
             key["features"], spec, context,
             json.dumps(knobs, sort_keys=True, separators=(",", ":")),
             status, seconds, context))
db.commit()
