-- The tuning database's schema (tqc.tuning creates it; tq-aot --tuning-db
-- and tqc.compile(tuning_db=...) read it; docs/autotune.md).
-- One row per measurement. Its key: tqc_version, the target (triple, cpu,
-- features_hash), spec (the kernel's name), context (the context-length
-- bucket: the power of two >= the measured context) and knobs (canonical
-- JSON: sorted keys, no spaces, integers as numbers).
CREATE TABLE IF NOT EXISTS measurements (
  id INTEGER PRIMARY KEY,
  tqc_version TEXT NOT NULL,
  triple TEXT NOT NULL,
  cpu TEXT NOT NULL,
  features_hash TEXT NOT NULL,
  features TEXT NOT NULL,
  spec TEXT NOT NULL,
  kind TEXT NOT NULL,
  k_format TEXT NOT NULL,
  v_format TEXT NOT NULL,
  head_dim INTEGER NOT NULL,
  grp INTEGER NOT NULL,
  context INTEGER NOT NULL,
  knobs TEXT NOT NULL,
  -- ok: measured and checked against the reference; wrong: its output
  -- disagreed with the reference; compile_error: it did not compile;
  -- error: it failed at run time. Seconds are +inf unless ok.
  status TEXT NOT NULL CHECK (status IN ('ok', 'wrong', 'compile_error', 'error')),
  seconds REAL NOT NULL,
  statistic TEXT NOT NULL,
  rounds INTEGER NOT NULL,
  measured_context INTEGER NOT NULL,
  detail TEXT NOT NULL DEFAULT '',
  host TEXT NOT NULL DEFAULT '',
  created TEXT NOT NULL,
  UNIQUE (tqc_version, triple, cpu, features_hash, spec, context, knobs)
);
CREATE INDEX IF NOT EXISTS measurements_key ON measurements
  (tqc_version, triple, cpu, features_hash, spec, context, status, seconds);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT OR IGNORE INTO meta VALUES ('schema_version', '1');
