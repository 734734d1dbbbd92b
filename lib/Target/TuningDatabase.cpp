//===- TuningDatabase.cpp - Reading the tuning database -------------------===//
//
// The lookup side of the tuning database (schema in docs/autotune.md; the
// Python package's tqc.tuning writes it): the best correct measurement of a
// kernel for a tqc version and a target.
//
//===----------------------------------------------------------------------===//

#include "tq/Target/KernelLibrary.h"
#include "tq/Target/Tuning.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <sqlite3.h>

using namespace mlir;
using namespace mlir::tq;

namespace {

/// A read-only connection, closed on destruction.
struct Database {
  sqlite3 *db = nullptr;
  ~Database() {
    if (db)
      sqlite3_close(db);
  }
};

struct Statement {
  sqlite3_stmt *stmt = nullptr;
  ~Statement() {
    if (stmt)
      sqlite3_finalize(stmt);
  }
};

std::string columnText(sqlite3_stmt *stmt, int column) {
  const unsigned char *text = sqlite3_column_text(stmt, column);
  return text ? reinterpret_cast<const char *>(text) : "";
}

} // namespace

bool mlir::tq::lookupTuningRecord(const std::string &database,
                                  const std::string &version,
                                  const TuningTarget &target,
                                  const std::string &spec, int64_t context,
                                  std::optional<TuningRecord> &record,
                                  std::string &error) {
  record.reset();
  Database db;
  if (sqlite3_open_v2(database.c_str(), &db.db, SQLITE_OPEN_READONLY,
                      nullptr) != SQLITE_OK) {
    error = "cannot open tuning database '" + database +
            "': " + (db.db ? sqlite3_errmsg(db.db) : "out of memory");
    return false;
  }
  // The key: version, target (triple, CPU, features), kernel, context
  // bucket; among its measurements the fastest correct one.
  const char *filter = "tqc_version = ?1 AND triple = ?2 AND cpu = ?3 AND "
                       "features_hash = ?4 AND spec = ?5 AND status = 'ok'";
  std::string sql = llvm::formatv(
      "SELECT id, context, seconds, rounds, statistic, knobs FROM "
      "measurements WHERE {0} AND context = {1} ORDER BY seconds ASC, id ASC "
      "LIMIT 1",
      filter,
      context > 0 ? std::string("?6")
                  : llvm::formatv("(SELECT MAX(context) FROM measurements "
                                  "WHERE {0})",
                                  filter)
                        .str());
  Statement q;
  if (sqlite3_prepare_v2(db.db, sql.c_str(), -1, &q.stmt, nullptr) !=
      SQLITE_OK) {
    error = "tuning database '" + database +
            "' is not one tqc.tuning wrote: " + sqlite3_errmsg(db.db);
    return false;
  }
  int i = 1;
  for (const std::string *s : {&version, &target.triple, &target.cpu,
                               &target.featuresHash, &spec})
    sqlite3_bind_text(q.stmt, i++, s->c_str(), -1, SQLITE_TRANSIENT);
  if (context > 0)
    sqlite3_bind_int64(q.stmt, 6, contextBucket(context));
  int rc = sqlite3_step(q.stmt);
  if (rc == SQLITE_DONE)
    return true;
  if (rc != SQLITE_ROW) {
    error = "reading tuning database '" + database +
            "': " + sqlite3_errmsg(db.db);
    return false;
  }
  TuningRecord r;
  r.id = sqlite3_column_int64(q.stmt, 0);
  r.context = sqlite3_column_int64(q.stmt, 1);
  r.seconds = sqlite3_column_double(q.stmt, 2);
  r.rounds = sqlite3_column_int64(q.stmt, 3);
  r.statistic = columnText(q.stmt, 4);
  std::string knobs = columnText(q.stmt, 5);
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(knobs);
  const llvm::json::Object *object =
      parsed ? parsed->getAsObject() : nullptr;
  if (!object) {
    if (!parsed)
      llvm::consumeError(parsed.takeError());
    error = llvm::formatv("tuning database '{0}': record {1} has knobs that "
                          "are not a JSON object: {2}",
                          database, r.id, knobs)
                .str();
    return false;
  }
  for (const auto &[name, value] : *object) {
    if (auto s = value.getAsString())
      r.knobs[name.str()] = s->str();
    else if (auto n = value.getAsInteger())
      r.knobs[name.str()] = std::to_string(*n);
    else {
      error = llvm::formatv("tuning database '{0}': record {1}'s knob {2} is "
                            "neither a string nor an integer",
                            database, r.id, name.str())
                  .str();
      return false;
    }
  }
  record = std::move(r);
  return true;
}

namespace {

/// For every attention spec: its best record for `target` through
/// lookupTuningRecord, its knobs set by `setKnobs` (which may refuse
/// them), and a line of `report` saying which record or why defaults.
bool applyRecords(
    const std::string &database, const std::string &version, int64_t context,
    const std::vector<RuntimeKernelSpec> &specs, const TuningTarget &target,
    const std::string &where,
    llvm::function_ref<bool(const RuntimeKernelSpec &, const KnobValues &,
                            std::string &)>
        setKnobs,
    std::vector<std::string> &report, std::string &error) {
  const std::string bucket =
      context > 0 ? llvm::formatv("context bucket {0}", contextBucket(context))
                        .str()
                  : "any context";
  for (const RuntimeKernelSpec &spec : specs) {
    if (!isAttentionKind(spec.kind))
      continue;
    std::optional<TuningRecord> record;
    if (!lookupTuningRecord(database, version, target, spec.name(), context,
                            record, error))
      return false;
    if (!record) {
      report.push_back(spec.name() + ": no record for " + where + ", " +
                       bucket + ": defaults");
      continue;
    }
    std::vector<std::string> knobs;
    for (const auto &[name, value] : record->knobs)
      knobs.push_back(name + "=" + value);
    std::string why;
    if (!setKnobs(spec, record->knobs, why)) {
      report.push_back(llvm::formatv("{0}: record {1} refused ({2}): defaults",
                                     spec.name(), record->id, why)
                           .str());
      continue;
    }
    report.push_back(llvm::formatv(
        "{0}: record {1} (context {2}, {3} of {4} rounds {5} ms): {6}",
        spec.name(), record->id, record->context, record->statistic,
        record->rounds, llvm::format("%.4f", record->seconds * 1e3),
        knobs.empty() ? std::string("defaults") : llvm::join(knobs, " "))
                         .str());
  }
  return true;
}

} // namespace

bool mlir::tq::applyTuningDatabase(const std::string &database,
                                   const std::string &version, int64_t context,
                                   const std::vector<RuntimeKernelSpec> &specs,
                                   KernelLibraryOptions &options,
                                   std::vector<std::string> &report,
                                   std::string &error) {
  TuningTarget target;
  if (!cpuTuningTarget(options.cpu, target, error))
    return false;
  const std::string where =
      llvm::formatv("tqc {0}, {1}, cpu {2}, features {3}", version,
                    target.triple, target.cpu, target.featuresHash)
          .str();
  return applyRecords(
      database, version, context, specs, target, where,
      [&](const RuntimeKernelSpec &spec, const KnobValues &knobs,
          std::string &why) {
        return setKernelKnobs(spec, knobs, options, why);
      },
      report, error);
}

bool mlir::tq::applyGpuTuningDatabase(
    const std::string &database, const std::string &version, int64_t context,
    const std::vector<RuntimeKernelSpec> &specs, const GpuTarget &gpu,
    const std::string &device, KernelLibraryOptions &options,
    std::vector<std::string> &report, std::string &error) {
  const TuningTarget target = gpuTuningTarget(gpu, device);
  const std::string where =
      llvm::formatv("tqc {0}, {1}, chip {2}, device '{3}'", version,
                    target.triple, target.cpu, device)
          .str();
  return applyRecords(
      database, version, context, specs, target, where,
      [&](const RuntimeKernelSpec &spec, const KnobValues &knobs,
          std::string &why) {
        return setGpuKernelKnobs(spec, knobs, gpu, options, why);
      },
      report, error);
}
