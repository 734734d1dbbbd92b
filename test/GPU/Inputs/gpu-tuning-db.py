"""Writes a GPU tuning database for tuning-db.test.

    gpu-tuning-db.py SCHEMA DB KEY.json

KEY.json is tq-aot --print-tuning-target's output for a GPU target and
device. Records of tq_decode_turbo3_0_turbo3_0_d128_g4 at context 4096:
for that device block_warps=2 (the fastest correct), block_warps=8
(slower) and block_warps=1 (faster but wrong); for another device of the
same chip block_warps=8 (faster than all, which must not be used).
"""
import json
import math
import sqlite3
import sys

schema, path, key_file = sys.argv[1:4]
key = json.load(open(key_file))
db = sqlite3.connect(path)
db.executescript(open(schema).read())
spec = "tq_decode_turbo3_0_turbo3_0_d128_g4"
rows = [  # (features, features_hash, knobs, status, seconds)
    (key["features"], key["features_hash"], {"block_warps": "2"}, "ok", 2e-4),
    (key["features"], key["features_hash"], {"block_warps": "8"}, "ok", 3e-4),
    (key["features"], key["features_hash"], {"block_warps": "1"}, "wrong",
     math.inf),
    ("Another GPU", "0123456789abcdef", {"block_warps": "8"}, "ok", 1e-4),
]
for features, features_hash, knobs, status, seconds in rows:
    db.execute(
        "INSERT INTO measurements (tqc_version, triple, cpu, features_hash, "
        "features, spec, kind, k_format, v_format, head_dim, grp, context, "
        "knobs, status, seconds, statistic, rounds, measured_context, "
        "created) VALUES (?, ?, ?, ?, ?, ?, 'decode', 'turbo3_0', "
        "'turbo3_0', 128, 4, 4096, ?, ?, ?, 'best', 5, 4096, '2026-11-26')",
        (key["tqc_version"], key["triple"], key["cpu"], features_hash,
         features, spec, json.dumps(knobs, sort_keys=True,
                                    separators=(",", ":")),
         status, seconds))
db.commit()
