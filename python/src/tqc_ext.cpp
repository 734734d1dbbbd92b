//===- tqc_ext.cpp - tqc's native Python module (tqc._tqc) -----------------===//
//
// nanobind bindings over three of tqc's libraries, linked from an installed
// tqc prefix (find_package(tqc COMPONENTS compiler)):
//   - the compiler driver tq-aot uses (writeKernelLibrary /
//     writeGpuKernelLibrary with RuntimeKernelSpecs and
//     KernelLibraryOptions);
//   - the C runtime (libtq_runtime: tq_append, tq_attention,
//     tq_attention_v1) over a KV cache whose pools and page table this
//     module owns (or whose pools the caller lends);
//   - lib/Quant's row encoders/decoders and reference attention.
// The public Python API (argument defaults, spec expansion, kernels.json)
// is tqc/__init__.py; this module checks every array (dtype, shape,
// C-contiguity, device, writability) and raises TypeError / ValueError
// naming the argument, what was expected and what was given, and
// tqc.TQError (status name + tq_last_error()) for runtime statuses.
// Kernel calls and compiles run with the GIL released.
//
//===----------------------------------------------------------------------===//

#include "tq/Quant/Attention.h"
#include "tq/Quant/Format.h"
#include "tq/Quant/Half.h"
#include "tq/Target/GpuKernelLibrary.h"
#include "tq/Target/KernelLibrary.h"
#include "tq/Target/Tuning.h"
#include "tq/tq_runtime.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/TargetSelect.h"

#include <nanobind/eval.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

namespace nb = nanobind;
using namespace nb::literals;

namespace {

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

/// tqc.TQError and tqc.CompileError, created in NB_MODULE.
nb::object tqErrorType;
nb::object compileErrorType;

[[noreturn]] void typeError(const std::string &message) {
  throw nb::type_error(message.c_str());
}
[[noreturn]] void valueError(const std::string &message) {
  throw nb::value_error(message.c_str());
}

const char *statusName(tq_status s) {
  switch (s) {
  case TQ_STATUS_OK: return "TQ_STATUS_OK";
  case TQ_STATUS_INVALID_ARGUMENT: return "TQ_STATUS_INVALID_ARGUMENT";
  case TQ_STATUS_VERSION_MISMATCH: return "TQ_STATUS_VERSION_MISMATCH";
  case TQ_STATUS_NOT_FOUND: return "TQ_STATUS_NOT_FOUND";
  case TQ_STATUS_OUT_OF_RANGE: return "TQ_STATUS_OUT_OF_RANGE";
  case TQ_STATUS_OVERFLOW: return "TQ_STATUS_OVERFLOW";
  case TQ_STATUS_OUT_OF_MEMORY: return "TQ_STATUS_OUT_OF_MEMORY";
  case TQ_STATUS_UNAVAILABLE: return "TQ_STATUS_UNAVAILABLE";
  case TQ_STATUS_DEVICE_ERROR: return "TQ_STATUS_DEVICE_ERROR";
  }
  return "TQ_STATUS_UNKNOWN";
}

/// The outcome of one runtime call: its status and, when it failed, what
/// tq_last_error() said after it (on the calling thread).
struct CallResult {
  tq_status status = TQ_STATUS_OK;
  std::string message;
};

/// Runs `call` (a runtime entry point) and records its failure's message.
/// Called with the GIL released: the runtime's message is per thread, and
/// this is the thread the call ran on.
template <typename F> CallResult runtimeCall(F &&call) {
  CallResult r;
  r.status = call();
  if (r.status != TQ_STATUS_OK)
    r.message = tq_last_error();
  return r;
}

/// Raises tqc.TQError(message, status) for a failed call: what it was, the
/// status and the runtime's message (every failing runtime call sets one).
void check(const CallResult &r, const char *what) {
  if (r.status == TQ_STATUS_OK)
    return;
  std::string message = std::string(what) + ": " + statusName(r.status) +
                        " (" + tq_status_string(r.status) + ")";
  if (!r.message.empty())
    message += ": " + r.message;
  nb::object error = tqErrorType(message, statusName(r.status), int(r.status));
  PyErr_SetObject(tqErrorType.ptr(), error.ptr());
  throw nb::python_error();
}

//===----------------------------------------------------------------------===//
// Arrays
//===----------------------------------------------------------------------===//

using Array = nb::ndarray<>;       // writable
using RoArray = nb::ndarray<nb::ro>; // read-only access

std::string typeName(nb::handle h) {
  return nb::type_name(h.type()).c_str();
}

std::string dtypeName(nb::dlpack::dtype t) {
  const char *base = "?";
  switch (nb::dlpack::dtype_code(t.code)) {
  case nb::dlpack::dtype_code::Int: base = "int"; break;
  case nb::dlpack::dtype_code::UInt: base = "uint"; break;
  case nb::dlpack::dtype_code::Float: base = "float"; break;
  case nb::dlpack::dtype_code::Bfloat: base = "bfloat"; break;
  case nb::dlpack::dtype_code::Complex: base = "complex"; break;
  case nb::dlpack::dtype_code::Bool: return "bool";
  default: break;
  }
  return std::string(base) + std::to_string(t.bits) +
         (t.lanes != 1 ? "x" + std::to_string(t.lanes) : "");
}

template <typename A> std::string shapeString(const A &a) {
  std::string s = "(";
  for (size_t i = 0; i < a.ndim(); ++i)
    s += (i ? ", " : "") + std::to_string(a.shape(i)) +
         (a.ndim() == 1 ? "," : "");
  return s + ")";
}

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") +
         (shape[i] < 0 ? std::string("*") : std::to_string(shape[i])) +
         (shape.size() == 1 ? "," : "");
  return s + ")";
}

template <typename A> std::string stridesString(const A &a) {
  std::string s = "(";
  for (size_t i = 0; i < a.ndim(); ++i)
    s += (i ? ", " : "") + std::to_string(a.stride(i)) +
         (a.ndim() == 1 ? "," : "");
  return s + ")";
}

/// Converts `obj` (anything with __dlpack__ or the buffer protocol: numpy,
/// torch, ...) to an array without copying or converting it.
template <typename A>
A asArray(nb::handle obj, const char *name, bool writable) {
  A a;
  if (nb::try_cast<A>(obj, a, /*convert=*/false))
    return a;
  RoArray ro;
  if (writable && nb::try_cast<RoArray>(obj, ro, false))
    valueError(std::string(name) + ": expected a writable array, got a "
               "read-only " + typeName(obj));
  typeError(std::string(name) + ": expected " +
            (writable ? "a writable array" : "an array") +
            " (numpy, or any object with __dlpack__ or the buffer protocol), "
            "got " + typeName(obj));
}

/// The strides (in elements) of a C-contiguous array of `a`'s shape.
template <typename A> std::string contiguousStrides(const A &a) {
  std::vector<int64_t> st(a.ndim());
  int64_t e = 1;
  for (size_t j = a.ndim(); j-- > 0;) {
    st[j] = e;
    e *= int64_t(a.shape(j));
  }
  std::string s = "(";
  for (size_t j = 0; j < st.size(); ++j)
    s += (j ? ", " : "") + std::to_string(st[j]) + (st.size() == 1 ? "," : "");
  return s + ")";
}

/// Checks a C-contiguous CPU array of dtype `dtype` whose shape matches
/// `shape` (-1: any extent).
template <typename A>
void checkArray(const A &a, const char *name, nb::dlpack::dtype dtype,
                const std::vector<int64_t> &shape) {
  if (a.device_type() != nb::device::cpu::value)
    valueError(std::string(name) + ": expected a CPU array, got one on "
               "DLPack device type " + std::to_string(a.device_type()));
  if (a.dtype() != dtype)
    typeError(std::string(name) + ": expected dtype " + dtypeName(dtype) +
              ", got " + dtypeName(a.dtype()));
  bool ok = a.ndim() == shape.size();
  for (size_t i = 0; ok && i < shape.size(); ++i)
    ok = shape[i] < 0 || int64_t(a.shape(i)) == shape[i];
  if (!ok)
    valueError(std::string(name) + ": expected shape " + shapeString(shape) +
               ", got " + shapeString(a));
  // An array without elements has no layout to check (DLPack may give it
  // any strides: numpy's zeros((0, 128)) arrives with (0, 0)).
  if (a.size() == 0)
    return;
  int64_t expect = 1;
  for (size_t i = a.ndim(); i-- > 0;) {
    if (a.shape(i) != 1 && a.stride(i) != expect)
      valueError(std::string(name) + ": expected a C-contiguous array "
                 "(strides in elements " + contiguousStrides(a) +
                 "), got strides " + stridesString(a) +
                 "; pass a contiguous copy (numpy.ascontiguousarray, "
                 "tensor.contiguous())");
    expect *= int64_t(a.shape(i));
  }
}

template <typename T> nb::dlpack::dtype dt() { return nb::dtype<T>(); }

/// A new numpy array of `shape` owning zero-initialised memory.
template <typename T>
nb::ndarray<nb::numpy, T> newArray(const std::vector<size_t> &shape) {
  size_t n = 1;
  for (size_t s : shape)
    n *= s;
  T *data = new T[n ? n : 1]();
  nb::capsule owner(data, [](void *p) noexcept { delete[] (T *)p; });
  return nb::ndarray<nb::numpy, T>(data, shape.size(), shape.data(), owner);
}

/// An int32 vector from a Python sequence or a 1-D integer array.
std::vector<int32_t> intVector(nb::handle obj, const char *name) {
  std::vector<int32_t> out;
  RoArray a;
  if (nb::try_cast<RoArray>(obj, a, false) && a.ndim() == 1 &&
      a.device_type() == nb::device::cpu::value &&
      (a.dtype() == dt<int32_t>() || a.dtype() == dt<int64_t>())) {
    out.resize(a.shape(0));
    for (size_t i = 0; i < out.size(); ++i) {
      const uint8_t *base = (const uint8_t *)a.data();
      int64_t off = int64_t(i) * a.stride(0);
      int64_t v = a.dtype() == dt<int32_t>()
                      ? ((const int32_t *)base)[off]
                      : ((const int64_t *)base)[off];
      if (v < 0 || v > std::numeric_limits<int32_t>::max())
        valueError(std::string(name) + "[" + std::to_string(i) +
                   "]: expected a value in [0, 2^31), got " +
                   std::to_string(v));
      out[i] = int32_t(v);
    }
    return out;
  }
  if (!nb::isinstance<nb::sequence>(obj) || nb::isinstance<nb::str>(obj))
    typeError(std::string(name) + ": expected a sequence of integers or a "
              "1-D int32/int64 array, got " + typeName(obj));
  size_t i = 0;
  for (nb::handle item : obj) {
    int64_t v;
    if (!nb::try_cast<int64_t>(item, v, false))
      typeError(std::string(name) + "[" + std::to_string(i) +
                "]: expected an integer, got " + typeName(item));
    if (v < 0 || v > std::numeric_limits<int32_t>::max())
      valueError(std::string(name) + "[" + std::to_string(i) +
                 "]: expected a value in [0, 2^31), got " + std::to_string(v));
    out.push_back(int32_t(v));
    ++i;
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Formats (lib/Quant)
//===----------------------------------------------------------------------===//

tq::quant::Format getFormat(const std::string &name, int64_t headDim,
                            const char *what) {
  if (headDim <= 0 || headDim > (1 << 20))
    valueError(std::string(what) + ": head_dim must be in [1, 2^20], got " +
               std::to_string(headDim));
  auto f = tq::quant::Format::get(name, unsigned(headDim));
  if (!f)
    valueError(std::string(what) + ": " + f.status().message());
  return *f;
}

nb::list formats() {
  nb::list out;
  for (const auto &info : tq::quant::allFormats())
    out.append(nb::make_tuple(info.name, info.summary));
  return out;
}

nb::dict formatInfo(const std::string &name, int64_t headDim) {
  tq::quant::Format f = getFormat(name, headDim, "name");
  nb::dict d;
  d["name"] = f.name();
  d["head_dim"] = f.headDim();
  d["padded_dim"] = f.paddedDim();
  d["block_len"] = f.blockLen();
  d["bytes_per_block"] = f.bytesPerBlock();
  d["row_bytes"] = f.rowBytes();
  d["bits_per_value"] = f.bitsPerValue();
  d["has_rotation"] = f.hasRotation();
  return d;
}

/// encode(rows [..., D] float32, format) -> [..., row_bytes] uint8.
nb::ndarray<nb::numpy, uint8_t> encode(nb::handle rowsObj,
                                       const std::string &format) {
  RoArray rows = asArray<RoArray>(rowsObj, "rows", false);
  if (rows.ndim() < 1)
    valueError("rows: expected at least one dimension (..., head_dim), got "
               "a 0-d array");
  checkArray(rows, "rows", dt<float>(),
             std::vector<int64_t>(rows.ndim(), -1));
  int64_t d = int64_t(rows.shape(rows.ndim() - 1));
  tq::quant::Format f = getFormat(format, d, "format");
  std::vector<size_t> shape;
  size_t n = 1;
  for (size_t i = 0; i + 1 < rows.ndim(); ++i) {
    shape.push_back(rows.shape(i));
    n *= rows.shape(i);
  }
  shape.push_back(f.rowBytes());
  auto out = newArray<uint8_t>(shape);
  const float *x = (const float *)rows.data();
  uint8_t *y = out.data();
  std::string error;
  {
    nb::gil_scoped_release release;
    for (size_t r = 0; r < n && error.empty(); ++r) {
      tq::quant::Status s = f.encodeRow(
          std::span<const float>(x + r * size_t(d), size_t(d)),
          std::span<uint8_t>(y + r * f.rowBytes(), f.rowBytes()));
      if (!s.ok())
        error = "rows: row " + std::to_string(r) + ": " + s.message();
    }
  }
  if (!error.empty())
    valueError(error);
  return out;
}

/// decode(data [..., row_bytes] uint8, format, head_dim, rotated) ->
/// [..., head_dim] (rotated: [..., padded_dim]) float32.
nb::ndarray<nb::numpy, float> decode(nb::handle dataObj,
                                     const std::string &format,
                                     int64_t headDim, bool rotated) {
  RoArray data = asArray<RoArray>(dataObj, "data", false);
  tq::quant::Format f = getFormat(format, headDim, "format");
  if (data.ndim() < 1)
    valueError("data: expected at least one dimension (..., row_bytes), got "
               "a 0-d array");
  std::vector<int64_t> want(data.ndim(), -1);
  want.back() = int64_t(f.rowBytes());
  checkArray(data, "data", dt<uint8_t>(), want);
  size_t width = rotated ? f.paddedDim() : f.headDim();
  std::vector<size_t> shape;
  size_t n = 1;
  for (size_t i = 0; i + 1 < data.ndim(); ++i) {
    shape.push_back(data.shape(i));
    n *= data.shape(i);
  }
  shape.push_back(width);
  auto out = newArray<float>(shape);
  const uint8_t *x = (const uint8_t *)data.data();
  float *y = out.data();
  std::string error;
  {
    nb::gil_scoped_release release;
    for (size_t r = 0; r < n && error.empty(); ++r) {
      tq::quant::Status s = f.decodeRow(
          std::span<const uint8_t>(x + r * f.rowBytes(), f.rowBytes()),
          std::span<float>(y + r * width, width),
          rotated ? tq::quant::Domain::Rotated : tq::quant::Domain::Original);
      if (!s.ok())
        error = "data: row " + std::to_string(r) + ": " + s.message();
    }
  }
  if (!error.empty())
    valueError(error);
  return out;
}

/// lib/Quant's reference attention in double precision: exact over float
/// K/V, or over encoded rows when formats are given.
nb::ndarray<nb::numpy, double>
referenceAttention(nb::handle qObj, nb::handle kObj, nb::handle vObj,
                   std::optional<std::string> kFormat,
                   std::optional<std::string> vFormat, int64_t headDim,
                   int64_t vHeadDim, double scale, bool causal, int64_t window,
                   double softcap, nb::handle maskObj, nb::handle slopesObj,
                   nb::handle sinksObj) {
  RoArray q = asArray<RoArray>(qObj, "q", false);
  checkArray(q, "q", dt<float>(), {-1, -1, -1});
  RoArray k = asArray<RoArray>(kObj, "k", false);
  RoArray v = asArray<RoArray>(vObj, "v", false);
  if (kFormat.has_value() != vFormat.has_value())
    valueError("k_format and v_format: give both (encoded K and V rows) or "
               "neither (float rows)");
  tq::quant::AttentionShape shape;
  shape.numQueries = unsigned(q.shape(0));
  shape.numQHeads = unsigned(q.shape(1));
  shape.headDim = unsigned(q.shape(2));
  if (headDim && headDim != int64_t(shape.headDim))
    valueError("head_dim: q's rows have " + std::to_string(shape.headDim) +
               " values, head_dim says " + std::to_string(headDim));
  if (window < 0)
    valueError("window: expected >= 0, got " + std::to_string(window));
  unsigned dv = 0;
  std::optional<tq::quant::Format> kf, vf;
  if (kFormat) {
    if (k.ndim() != 3 || v.ndim() != 3)
      valueError("k and v: expected encoded rows (keys, kv_heads, "
                 "row_bytes), got shapes " + shapeString(k) + " and " +
                 shapeString(v));
    kf = getFormat(*kFormat, shape.headDim, "k_format");
    dv = vHeadDim ? unsigned(vHeadDim) : shape.headDim;
    vf = getFormat(*vFormat, dv, "v_format");
    checkArray(k, "k", dt<uint8_t>(), {-1, -1, int64_t(kf->rowBytes())});
    checkArray(v, "v", dt<uint8_t>(),
               {int64_t(k.shape(0)), int64_t(k.shape(1)),
                int64_t(vf->rowBytes())});
  } else {
    checkArray(k, "k", dt<float>(), {-1, -1, int64_t(shape.headDim)});
    if (v.ndim() != 3)
      valueError("v: expected shape (keys, kv_heads, v_head_dim), got " +
                 shapeString(v));
    dv = unsigned(v.shape(2));
    checkArray(v, "v", dt<float>(),
               {int64_t(k.shape(0)), int64_t(k.shape(1)), int64_t(dv)});
  }
  shape.numKeys = unsigned(k.shape(0));
  shape.numKvHeads = unsigned(k.shape(1));
  shape.valueHeadDim = dv == shape.headDim ? 0 : dv;
  tq::quant::AttentionOptions o;
  o.scale = scale;
  o.causal = causal;
  o.window = unsigned(window);
  o.softcap = softcap;
  RoArray mask, slopes, sinks;
  if (!maskObj.is_none()) {
    mask = asArray<RoArray>(maskObj, "mask", false);
    checkArray(mask, "mask", dt<float>(),
               {int64_t(shape.numQueries), int64_t(shape.numKeys)});
    o.mask = {(const float *)mask.data(), mask.size()};
  }
  if (!slopesObj.is_none()) {
    slopes = asArray<RoArray>(slopesObj, "slopes", false);
    checkArray(slopes, "slopes", dt<float>(), {int64_t(shape.numQHeads)});
    o.slopes = {(const float *)slopes.data(), slopes.size()};
  }
  if (!sinksObj.is_none()) {
    sinks = asArray<RoArray>(sinksObj, "sinks", false);
    checkArray(sinks, "sinks", dt<float>(), {int64_t(shape.numQHeads)});
    o.sinks = {(const float *)sinks.data(), sinks.size()};
  }
  auto out = newArray<double>(
      {size_t(shape.numQueries), size_t(shape.numQHeads), size_t(shape.vDim())});
  std::span<const float> qs((const float *)q.data(), q.size());
  std::span<double> os(out.data(), out.size());
  tq::quant::Status s;
  {
    nb::gil_scoped_release release;
    if (kf)
      s = tq::quant::referenceAttentionQuantized(
          shape, o, qs, *kf,
          {(const uint8_t *)k.data(), k.size()}, *vf,
          {(const uint8_t *)v.data(), v.size()}, os);
    else
      s = tq::quant::referenceAttention(
          shape, o, qs, {(const float *)k.data(), k.size()},
          {(const float *)v.data(), v.size()}, os);
  }
  if (!s.ok())
    valueError("reference_attention: " + s.message());
  return out;
}

//===----------------------------------------------------------------------===//
// Compiler driver
//===----------------------------------------------------------------------===//

/// One RuntimeKernelSpec as Python passes it:
/// (kind, k_format, v_format, head_dim, v_head_dim, group, causal, window,
///  softcap, centred).
using SpecTuple = std::tuple<std::string, std::string, std::string, int64_t,
                             int64_t, int64_t, bool, int64_t, double, bool>;

mlir::tq::RuntimeKernelKind kindFromName(const std::string &k) {
  using K = mlir::tq::RuntimeKernelKind;
  for (K kind : {K::Append, K::Decode, K::Prefill, K::GgmlDecode,
                 K::GgmlPrefill, K::Dequantize})
    if (k == mlir::tq::kindName(kind))
      return kind;
  valueError("kind: expected append, decode, prefill, dequantize, "
             "ggml_decode or ggml_prefill, got '" + k + "'");
}

mlir::tq::RuntimeKernelSpec toSpec(const SpecTuple &t) {
  mlir::tq::RuntimeKernelSpec s;
  s.kind = kindFromName(std::get<0>(t));
  s.keyFormat = std::get<1>(t);
  s.valueFormat = std::get<2>(t);
  auto positive = [](int64_t v, const char *what) {
    if (v <= 0 || v > (1 << 20))
      valueError(std::string(what) + ": expected a positive integer "
                 "(at most 2^20), got " + std::to_string(v));
    return unsigned(v);
  };
  s.headDim = positive(std::get<3>(t), "head_dim");
  s.valueHeadDim = std::get<4>(t) ? positive(std::get<4>(t), "v_head_dim") : 0;
  s.group = positive(std::get<5>(t), "gqa");
  s.causal = std::get<6>(t);
  s.window = std::get<7>(t);
  s.softcap = float(std::get<8>(t));
  s.centred = std::get<9>(t);
  return s;
}

std::string specName(const SpecTuple &t) { return toSpec(t).name(); }

/// Compiles `specs` into a kernel library in `outputDir` with the driver
/// tq-aot uses; raises tqc.CompileError with the compiler's message.
std::vector<std::string>
compileLibrary(const std::vector<SpecTuple> &specTuples,
               const std::string &outputDir, const std::string &target,
               const std::string &cpu, int64_t decodeTile, int64_t prefillTile,
               int64_t splits, const std::string &lookup, bool naive,
               const std::string &libraryName, nb::object progress,
               int64_t maxUnrolledChunks, const std::string &centroidPermute,
               const std::map<std::string, mlir::tq::KnobValues> &kernelKnobs,
               const std::string &tuningDb, int64_t tuningContext,
               const std::vector<std::pair<std::string, std::string>> &inputs,
               const std::string &gpuDevice, unsigned jobs) {
  std::vector<mlir::tq::RuntimeKernelSpec> specs;
  for (const SpecTuple &t : specTuples)
    specs.push_back(toSpec(t));
  mlir::tq::KernelLibraryOptions options;
  options.outputDir = outputDir;
  options.cpu = cpu;
  options.jobs = jobs;
  if (decodeTile < 0 || prefillTile < 0 || splits <= 0 ||
      maxUnrolledChunks < 0 || tuningContext < 0)
    valueError("tile_size, max_unrolled_chunks and tuning_context must be "
               ">= 0 and splits > 0");
  if (!centroidPermute.empty() && centroidPermute != "none" &&
      centroidPermute != "avx2" && centroidPermute != "avx512")
    valueError("centroid_permute: expected none, avx2 or avx512, got '" +
               centroidPermute + "'");
  options.maxUnrolledChunks = maxUnrolledChunks;
  options.centroidPermute = centroidPermute;
  if (decodeTile)
    options.decodeTileSize = decodeTile;
  if (prefillTile)
    options.prefillTileSize = prefillTile;
  options.decodeSplits = splits;
  options.naive = naive;
  options.libraryName = libraryName;
  auto strategy = mlir::tq::symbolizeLookupStrategy(lookup);
  if (!strategy)
    valueError("lookup: expected tile, select or lut, got '" + lookup + "'");
  options.lookup = *strategy;
  std::optional<mlir::tq::GpuTarget> gpu;
  if (target == "nvptx" || target == "amdgcn") {
    std::string why;
    auto t = mlir::tq::GpuTarget::get(target, cpu == "host" ? "" : cpu, why);
    if (mlir::failed(t)) {
      PyErr_SetString(compileErrorType.ptr(), why.c_str());
      throw nb::python_error();
    }
    gpu = *t;
  } else if (target != "cpu") {
    valueError("target: expected cpu, nvptx or amdgcn, got '" + target + "'");
  }
  if (gpu && !inputs.empty())
    valueError("inputs: IR files compile for target='cpu' only");
  if (gpu && !tuningDb.empty() && gpuDevice.empty())
    valueError("tuning_db with a GPU target: give gpu_device (records are "
               "per device: GpuRuntime.device_name)");
  if (!gpu && !gpuDevice.empty())
    valueError("gpu_device applies to GPU targets");
  // Per-kernel knobs, then the tuning database's records for the rest.
  std::vector<std::string> tuningReport;
  {
    std::string why;
    for (const auto &[name, values] : kernelKnobs) {
      const mlir::tq::RuntimeKernelSpec *spec = nullptr;
      for (const auto &s : specs)
        if (s.name() == name)
          spec = &s;
      if (!spec)
        valueError("knobs: no kernel '" + name + "' in this library");
      if (!(gpu ? mlir::tq::setGpuKernelKnobs(*spec, values, *gpu, options,
                                              why)
                : mlir::tq::setKernelKnobs(*spec, values, options, why)))
        valueError("knobs: " + why);
    }
    if (!tuningDb.empty()) {
      std::vector<mlir::tq::RuntimeKernelSpec> rest;
      for (const auto &s : specs)
        if (!kernelKnobs.count(s.name()))
          rest.push_back(s);
      bool ok;
      {
        nb::gil_scoped_release release;
        ok = gpu ? mlir::tq::applyGpuTuningDatabase(
                       tuningDb, TQC_PY_VERSION, tuningContext, rest, *gpu,
                       gpuDevice, options, tuningReport, why)
                 : mlir::tq::applyTuningDatabase(tuningDb, TQC_PY_VERSION,
                                                 tuningContext, rest, options,
                                                 tuningReport, why);
      }
      if (!ok) {
        PyErr_SetString(compileErrorType.ptr(), why.c_str());
        throw nb::python_error();
      }
    }
  }

  // The progress callback runs on this thread with the GIL taken back; an
  // exception it raises is kept and re-raised after the compile (it must
  // not unwind through LLVM, built without exceptions).
  std::optional<nb::python_error> callbackError;
  mlir::tq::KernelProgress report;
  if (!progress.is_none())
    report = [&](size_t i, size_t n, const std::string &name) {
      nb::gil_scoped_acquire acquire;
      if (callbackError)
        return;
      try {
        progress(i, n, name);
      } catch (nb::python_error &e) {
        callbackError.emplace(std::move(e));
      }
    };
  std::string error;
  bool ok;
  {
    nb::gil_scoped_release release;
    // LLVM registers its targets in global lists: once, before any compile,
    // so that compiles in several Python threads do not race there. GPU
    // targets register theirs inside the GPU lowering: one at a time.
    static std::once_flag nativeTarget;
    std::call_once(nativeTarget, [] {
      llvm::InitializeNativeTarget();
      llvm::InitializeNativeTargetAsmPrinter();
    });
    static std::mutex gpuMutex;
    std::unique_lock<std::mutex> gpuLock(gpuMutex, std::defer_lock);
    if (gpu)
      gpuLock.lock();
    std::unique_ptr<mlir::MLIRContext> context =
        mlir::tq::createKernelCompilerContext();
    // IR given by the user (tq-aot --input): (name, text) pairs.
    std::vector<mlir::OwningOpRef<mlir::ModuleOp>> parsed;
    std::vector<mlir::ModuleOp> modules;
    ok = true;
    for (const auto &[name, text] : inputs) {
      std::string diagnostics;
      mlir::ScopedDiagnosticHandler handler(
          context.get(), [&](mlir::Diagnostic &diag) {
            llvm::raw_string_ostream os(diagnostics);
            os << diag << "\n";
            return mlir::success();
          });
      mlir::OwningOpRef<mlir::ModuleOp> module =
          mlir::parseSourceString<mlir::ModuleOp>(
              text, mlir::ParserConfig(context.get()), name);
      if (!module) {
        error = "cannot parse '" + name + "': " + diagnostics;
        ok = false;
        break;
      }
      modules.push_back(*module);
      parsed.push_back(std::move(module));
    }
    if (ok)
      ok = gpu ? mlir::tq::writeGpuKernelLibrary(*context, specs, *gpu,
                                                 options, report, error)
               : mlir::tq::writeKernelLibrary(*context, specs, options,
                                              report, error, modules);
  }
  if (callbackError)
    throw *callbackError;
  if (!ok) {
    PyErr_SetString(compileErrorType.ptr(), error.c_str());
    throw nb::python_error();
  }
  return tuningReport;
}

/// GPU target `target` ("nvptx", "amdgcn") for chip `chip`; raises
/// ValueError naming the supported chips.
mlir::tq::GpuTarget gpuTarget(const std::string &target,
                              const std::string &chip) {
  std::string why;
  auto t = mlir::tq::GpuTarget::get(target, chip == "host" ? "" : chip, why);
  if (mlir::failed(t))
    valueError(why);
  return *t;
}

/// The knobs of a kernel spec for `cpu` (tqc.knobs); for a GPU `target`,
/// `cpu` is the chip.
nb::list kernelKnobs(const SpecTuple &t, const std::string &cpu,
                     const std::string &target) {
  std::vector<mlir::tq::KnobInfo> knobs;
  std::string error;
  if (target != "cpu")
    knobs = mlir::tq::gpuKernelKnobs(toSpec(t), gpuTarget(target, cpu));
  else if (!mlir::tq::kernelKnobs(toSpec(t), cpu, knobs, error))
    valueError(error);
  nb::list out;
  for (const mlir::tq::KnobInfo &k : knobs) {
    nb::dict d;
    d["name"] = k.name;
    d["description"] = k.description;
    d["legal"] = k.legal;
    d["values"] = k.values;
    d["default"] = k.defaultValue;
    d["only_with"] = k.onlyWith;
    out.append(d);
  }
  return out;
}

/// The tuning key of CPU `cpu`'s target, or of GPU `target`'s chip `cpu`
/// on device `device` (tqc.tuning.target_key).
mlir::tq::TuningTarget tuningKey(const std::string &cpu,
                                 const std::string &target,
                                 const std::string &device) {
  mlir::tq::TuningTarget t;
  std::string error;
  if (target != "cpu") {
    if (device.empty())
      valueError("device: a GPU target's tuning key names its device "
                 "(GpuRuntime.device_name)");
    return mlir::tq::gpuTuningTarget(gpuTarget(target, cpu), device);
  }
  if (!device.empty())
    valueError("device applies to GPU targets");
  if (!mlir::tq::cpuTuningTarget(cpu, t, error))
    valueError(error);
  return t;
}

nb::dict tuningTarget(const std::string &cpu, const std::string &target,
                      const std::string &device) {
  mlir::tq::TuningTarget t = tuningKey(cpu, target, device);
  nb::dict d;
  d["triple"] = t.triple;
  d["cpu"] = t.cpu;
  d["features"] = t.features;
  d["features_hash"] = t.featuresHash;
  return d;
}

/// tq-aot --tuning-db's lookup: the best record's id, context and knobs,
/// or None.
nb::object lookupTuningRecord(const std::string &db, const std::string &version,
                              const std::string &cpu, const std::string &spec,
                              int64_t context, const std::string &target,
                              const std::string &device) {
  mlir::tq::TuningTarget t = tuningKey(cpu, target, device);
  std::string error;
  std::optional<mlir::tq::TuningRecord> record;
  if (!mlir::tq::lookupTuningRecord(db, version, t, spec, context, record,
                                    error))
    valueError(error);
  if (!record)
    return nb::none();
  nb::dict d;
  d["id"] = record->id;
  d["context"] = record->context;
  d["seconds"] = record->seconds;
  d["knobs"] = record->knobs;
  return d;
}

//===----------------------------------------------------------------------===//
// Runtime and KV cache
//===----------------------------------------------------------------------===//

class Runtime {
public:
  Runtime(const std::string &libraryPath, uint32_t threads)
      : path_(libraryPath) {
    tq_runtime_options_v0 o = {TQ_RUNTIME_OPTIONS_VERSION_0, sizeof o,
                               path_.c_str(), threads, 0};
    CallResult r;
    {
      nb::gil_scoped_release release;
      r = runtimeCall([&] { return tq_runtime_create(&o, nullptr, &rt_); });
    }
    check(r, "tq_runtime_create");
  }
  ~Runtime() {
    if (rt_)
      tq_runtime_destroy(rt_);
  }
  Runtime(const Runtime &) = delete;
  Runtime &operator=(const Runtime &) = delete;

  void close() {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mutex_);
    if (rt_)
      tq_runtime_destroy(rt_);
    rt_ = nullptr;
  }
  bool closed() const { return rt_ == nullptr; }
  const std::string &path() const { return path_; }

  /// The runtime, locked for a call; raises when closed. Called with the
  /// GIL released (the lock may wait for another thread's kernel call).
  tq_runtime *acquire(std::unique_lock<std::mutex> &lock) {
    lock = std::unique_lock<std::mutex>(mutex_);
    return rt_;
  }

private:
  std::string path_;
  tq_runtime *rt_ = nullptr;
  std::mutex mutex_;
};

[[noreturn]] void closedError(const char *what) {
  valueError(std::string(what) + ": the runtime is closed");
}

class KVCache {
public:
  KVCache(const std::string &kFormat, const std::string &vFormat,
          int64_t headDim, int64_t numKvHeads, const std::string &layout,
          int64_t pageSize, int64_t numPages, int64_t numSeqs,
          nb::handle kPages, nb::handle vPages, bool headMajor)
      : kFormat_(kFormat), vFormat_(vFormat), headMajor_(headMajor) {
    if (layout == "paged")
      layout_ = TQ_LAYOUT_PAGED;
    else if (layout == "contiguous")
      layout_ = TQ_LAYOUT_CONTIGUOUS;
    else
      valueError("layout: expected 'paged' or 'contiguous', got '" + layout +
                 "'");
    auto positive = [](int64_t v, const char *what, int64_t max) {
      if (v <= 0 || v > max)
        valueError(std::string(what) + ": expected an integer in [1, " +
                   std::to_string(max) + "], got " + std::to_string(v));
      return v;
    };
    headDim_ = uint32_t(positive(headDim, "head_dim", 1 << 20));
    numKvHeads_ = uint32_t(positive(numKvHeads, "num_kv_heads", 1 << 16));
    pageSize_ = uint32_t(positive(pageSize, layout_ == TQ_LAYOUT_PAGED
                                                ? "page_size"
                                                : "capacity",
                                  std::numeric_limits<int32_t>::max()));
    numSeqs_ = uint32_t(positive(numSeqs, "num_seqs", 1 << 24));
    if (layout_ == TQ_LAYOUT_CONTIGUOUS) {
      if (numPages && numPages != numSeqs)
        valueError("num_pages: a contiguous cache has one page per sequence "
                   "(num_seqs = " + std::to_string(numSeqs) + "), got " +
                   std::to_string(numPages));
      numPages = numSeqs;
    }
    numPages_ = uint64_t(
        positive(numPages, "num_pages", std::numeric_limits<int32_t>::max()));
    kRowBytes_ = uint32_t(getFormat(kFormat, headDim, "k_format").rowBytes());
    vRowBytes_ = uint32_t(getFormat(vFormat, headDim, "v_format").rowBytes());
    kPages_ = pool(kPages, "k_pages", kRowBytes_);
    vPages_ = pool(vPages, "v_pages", vRowBytes_);
    pages_.resize(numSeqs_);
    lengths_.assign(numSeqs_, 0);
    for (uint64_t p = numPages_; p-- > 0;)
      free_.push_back(int32_t(p));
    rebuild();
  }

  /// The descriptor over the current page table (valid until it changes).
  tq_kv_cache_v0 descriptor() const {
    tq_kv_cache_v0 c{};
    c.version = TQ_KV_CACHE_VERSION_0;
    c.size = sizeof c;
    c.k_format = kFormat_.c_str();
    c.v_format = vFormat_.c_str();
    c.head_dim = headDim_;
    c.num_kv_heads = numKvHeads_;
    c.page_size = pageSize_;
    c.layout = layout_ | (headMajor_ ? TQ_LAYOUT_HEAD_MAJOR : 0u);
    c.k_row_bytes = kRowBytes_;
    c.v_row_bytes = vRowBytes_;
    c.num_pages = numPages_;
    c.k_pages = (uint8_t *)kPages_.data();
    c.v_pages = (uint8_t *)vPages_.data();
    c.num_seqs = numSeqs_;
    if (layout_ == TQ_LAYOUT_PAGED) {
      c.indptr = indptr_.data();
      c.indices = indices_.data();
      c.last_page_len = lastPageLen_.data();
    } else {
      c.seq_lens = seqLens_.data();
    }
    return c;
  }

  /// Encodes k, v ([n, kv_heads, head_dim] float32) into tokens start ..
  /// start + n - 1 of `seq` (start: the sequence's length when omitted, at
  /// most its length), taking pages from the free list as needed.
  void append(Runtime &runtime, nb::handle kObj, nb::handle vObj, int64_t seq,
              std::optional<int64_t> start) {
    RoArray k = asArray<RoArray>(kObj, "k", false);
    RoArray v = asArray<RoArray>(vObj, "v", false);
    std::vector<int64_t> want = {-1, int64_t(numKvHeads_), int64_t(headDim_)};
    checkArray(k, "k", dt<float>(), want);
    want[0] = int64_t(k.shape(0));
    checkArray(v, "v", dt<float>(), want);
    checkSeq(seq);
    if (k.shape(0) > std::numeric_limits<uint32_t>::max())
      valueError("k: too many rows in one call");
    const uint64_t n = k.shape(0);
    if (start && *start < 0)
      valueError("start: expected a token index >= 0, got " +
                 std::to_string(*start));

    // Everything below reads or changes the page table: under the cache's
    // lock (after the runtime's, as attention takes them), GIL released.
    std::string error;
    CallResult r;
    bool closed = false;
    {
      nb::gil_scoped_release release;
      std::unique_lock<std::mutex> lock;
      tq_runtime *rt = runtime.acquire(lock);
      std::lock_guard<std::mutex> cacheLock(mutex_);
      closed = !rt;
      const uint64_t len = lengths_[seq];
      const uint64_t at = start ? uint64_t(*start) : len;
      const uint64_t newLen = std::max(len, at + n);
      std::vector<int32_t> added;
      if (closed) {
      } else if (at > len) {
        error = "start: expected a token index in [0, " + std::to_string(len) +
                "] (sequence " + std::to_string(seq) + " holds " +
                std::to_string(len) + " tokens), got " + std::to_string(at);
      } else if (layout_ == TQ_LAYOUT_PAGED) {
        uint64_t need = (newLen + pageSize_ - 1) / pageSize_;
        if (need > pages_[seq].size() + free_.size())
          error = "k: sequence " + std::to_string(seq) + " would hold " +
                  std::to_string(newLen) + " tokens (" +
                  std::to_string(need) + " pages of " +
                  std::to_string(pageSize_) + "), but it has " +
                  std::to_string(pages_[seq].size()) + " and " +
                  std::to_string(free_.size()) + " pages are free";
        while (error.empty() && pages_[seq].size() + added.size() < need) {
          added.push_back(free_.back());
          free_.pop_back();
        }
        pages_[seq].insert(pages_[seq].end(), added.begin(), added.end());
      } else if (newLen > pageSize_) {
        error = "k: sequence " + std::to_string(seq) + " would hold " +
                std::to_string(newLen) + " tokens, beyond the cache's "
                "capacity of " + std::to_string(pageSize_);
      }
      if (!closed && error.empty()) {
        lengths_[seq] = newLen;
        rebuild();
        tq_kv_cache_v0 c = descriptor();
        r = runtimeCall([&] {
          return tq_append(rt, &c, uint32_t(seq), at, uint32_t(n),
                           (const float *)k.data(), (const float *)v.data());
        });
        if (r.status != TQ_STATUS_OK) {
          // Undo: the sequence keeps its length and pages.
          lengths_[seq] = len;
          pages_[seq].resize(pages_[seq].size() - added.size());
          free_.insert(free_.end(), added.rbegin(), added.rend());
          rebuild();
        }
      }
    }
    if (closed)
      closedError("KVCache.append");
    if (!error.empty())
      valueError(error);
    check(r, "tq_append");
  }

  /// Forgets the tokens of `seq` from `length` on (its pages beyond return
  /// to the free list).
  void truncate(int64_t seq, int64_t length) {
    checkSeq(seq);
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mutex_);
    if (length < 0 || uint64_t(length) > lengths_[seq]) {
      std::string held = std::to_string(lengths_[seq]);
      nb::gil_scoped_acquire acquire;
      valueError("length: expected [0, " + held + "], got " +
                 std::to_string(length));
    }
    lengths_[seq] = uint64_t(length);
    if (layout_ == TQ_LAYOUT_PAGED) {
      size_t keep = (size_t(length) + pageSize_ - 1) / pageSize_;
      while (pages_[seq].size() > keep) {
        free_.push_back(pages_[seq].back());
        pages_[seq].pop_back();
      }
    }
    rebuild();
  }

  /// The encoded K and V rows of `seq`: [len, kv_heads, row_bytes] each.
  std::tuple<nb::ndarray<nb::numpy, uint8_t>, nb::ndarray<nb::numpy, uint8_t>>
  rows(int64_t seq) {
    checkSeq(seq);
    std::unique_lock<std::mutex> lock = locked();
    uint64_t len = lengths_[seq];
    const tq_kv_cache_v0 cache = descriptor();
    auto k = newArray<uint8_t>({size_t(len), numKvHeads_, kRowBytes_});
    auto v = newArray<uint8_t>({size_t(len), numKvHeads_, vRowBytes_});
    for (uint64_t t = 0; t < len; ++t) {
      uint64_t page = layout_ == TQ_LAYOUT_PAGED ? pages_[seq][t / pageSize_]
                                                 : uint64_t(seq);
      uint64_t slot = layout_ == TQ_LAYOUT_PAGED ? t % pageSize_ : t;
      for (uint32_t h = 0; h < numKvHeads_; ++h) {
        uint64_t row =
            tq_kv_cache_row_index(&cache, page, uint32_t(slot), h);
        std::memcpy(k.data() + (t * numKvHeads_ + h) * kRowBytes_,
                    (const uint8_t *)kPages_.data() + row * kRowBytes_,
                    kRowBytes_);
        std::memcpy(v.data() + (t * numKvHeads_ + h) * vRowBytes_,
                    (const uint8_t *)vPages_.data() + row * vRowBytes_,
                    vRowBytes_);
      }
    }
    return {k, v};
  }

  std::vector<int64_t> lengths() {
    std::unique_lock<std::mutex> lock = locked();
    return std::vector<int64_t>(lengths_.begin(), lengths_.end());
  }
  std::vector<int32_t> pages(int64_t seq) {
    checkSeq(seq);
    std::unique_lock<std::mutex> lock = locked();
    return layout_ == TQ_LAYOUT_PAGED ? pages_[seq]
                                      : std::vector<int32_t>{int32_t(seq)};
  }
  size_t freePages() {
    std::unique_lock<std::mutex> lock = locked();
    return free_.size();
  }
  nb::object kPagesObject() const { return kOwner_; }
  nb::object vPagesObject() const { return vOwner_; }

  const std::string &kFormat() const { return kFormat_; }
  const std::string &vFormat() const { return vFormat_; }
  uint32_t headDim() const { return headDim_; }
  uint32_t numKvHeads() const { return numKvHeads_; }
  uint32_t pageSize() const { return pageSize_; }
  uint64_t numPages() const { return numPages_; }
  uint32_t numSeqs() const { return numSeqs_; }
  uint32_t kRowBytes() const { return kRowBytes_; }
  uint32_t vRowBytes() const { return vRowBytes_; }
  std::string layout() const {
    return layout_ == TQ_LAYOUT_PAGED ? "paged" : "contiguous";
  }
  bool headMajor() const { return headMajor_; }

  std::mutex &mutex() { return mutex_; }

private:
  /// The cache's lock, taken without holding the GIL (a thread in a kernel
  /// call holds it with the GIL released).
  std::unique_lock<std::mutex> locked() {
    nb::gil_scoped_release release;
    return std::unique_lock<std::mutex>(mutex_);
  }

  void checkSeq(int64_t seq) const {
    if (seq < 0 || uint64_t(seq) >= numSeqs_)
      valueError("seq: expected a sequence in [0, " +
                 std::to_string(numSeqs_) + "), got " + std::to_string(seq));
  }

  /// The caller's pool (checked) or a new zeroed one.
  Array pool(nb::handle obj, const char *name, uint32_t rowBytes) {
    // [pages][page_size][heads][row] or, head-major,
    // [pages][heads][page_size][row].
    std::vector<int64_t> shape = {int64_t(numPages_), int64_t(pageSize_),
                                  int64_t(numKvHeads_), int64_t(rowBytes)};
    if (headMajor_)
      std::swap(shape[1], shape[2]);
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(numPages_, uint64_t(pageSize_), &bytes) ||
        __builtin_mul_overflow(bytes, uint64_t(numKvHeads_), &bytes) ||
        __builtin_mul_overflow(bytes, uint64_t(rowBytes), &bytes) ||
        bytes > uint64_t(std::numeric_limits<int64_t>::max()))
      valueError(std::string(name) + ": a pool of " + shapeString(shape) +
                 " bytes overflows 64 bits");
    if (obj.is_none()) {
      auto a = newArray<uint8_t>({size_t(shape[0]), size_t(shape[1]),
                                  size_t(shape[2]), size_t(shape[3])});
      nb::object o = nb::cast(a);
      (name[0] == 'k' ? kOwner_ : vOwner_) = o;
      return nb::cast<Array>(o);
    }
    Array a = asArray<Array>(obj, name, true);
    checkArray(a, name, dt<uint8_t>(), shape);
    (name[0] == 'k' ? kOwner_ : vOwner_) = nb::borrow(obj);
    return a;
  }

  /// The flat page table the descriptor points at.
  void rebuild() {
    if (layout_ == TQ_LAYOUT_PAGED) {
      indptr_.assign(1, 0);
      indices_.clear();
      lastPageLen_.clear();
      for (uint32_t s = 0; s < numSeqs_; ++s) {
        indices_.insert(indices_.end(), pages_[s].begin(), pages_[s].end());
        indptr_.push_back(int32_t(indices_.size()));
        uint64_t len = lengths_[s];
        lastPageLen_.push_back(
            pages_[s].empty()
                ? 0
                : int32_t(len - (pages_[s].size() - 1) * pageSize_));
      }
      if (indices_.empty())
        indices_.push_back(0); // never read; a valid pointer
    } else {
      seqLens_.assign(lengths_.begin(), lengths_.end());
    }
  }

  std::string kFormat_, vFormat_;
  /// Pools [page][kv head][slot] (TQ_LAYOUT_HEAD_MAJOR).
  bool headMajor_ = false;
  uint32_t headDim_ = 0, numKvHeads_ = 0, pageSize_ = 0, layout_ = 0;
  uint32_t kRowBytes_ = 0, vRowBytes_ = 0, numSeqs_ = 0;
  uint64_t numPages_ = 0;
  Array kPages_, vPages_;
  nb::object kOwner_, vOwner_;
  std::vector<std::vector<int32_t>> pages_;
  std::vector<uint64_t> lengths_;
  std::vector<int32_t> free_;
  std::vector<int32_t> indptr_, indices_, lastPageLen_, seqLens_;
  std::mutex mutex_;
};

/// The f16 bits of -inf and of 0.
constexpr uint16_t kHalfNegInf = 0xFC00, kHalfZero = 0x0000;

/// Attention of every sequence's queries over `cache`. Plain libraries
/// (kernels tq_decode_* / tq_prefill_*) run tq_attention with causal /
/// window / soft-cap kernels; ggml packs (engine=True) run tq_attention_v1,
/// with causal and window turned into the f16 mask (combined with the
/// caller's mask), and ALiBi slopes and sinks.
/// q's rows and heads and each sequence's queries (q_indptr), checked
/// against `cache` as both runtimes need them; also checks the scalars.
struct Queries {
  RoArray q;
  int64_t rows = 0, heads = 0, maxLen = 0;
  std::vector<int32_t> qIndptr;
  std::vector<int64_t> lengths;
};

Queries checkQueries(KVCache &cache, nb::handle qObj, nb::handle qIndptrObj,
                     bool causal, int64_t window, double softcap,
                     double scale) {
  Queries out;
  RoArray &q = out.q;
  q = asArray<RoArray>(qObj, "q", false);
  if (q.ndim() != 3)
    valueError("q: expected shape (rows, num_q_heads, " +
               std::to_string(cache.headDim()) + "), got " + shapeString(q));
  checkArray(q, "q", dt<float>(), {-1, -1, int64_t(cache.headDim())});
  const int64_t rows = int64_t(q.shape(0)), heads = int64_t(q.shape(1));
  if (heads == 0 || heads % cache.numKvHeads() != 0)
    valueError("q: num_q_heads (" + std::to_string(heads) +
               ") must be a positive multiple of the cache's num_kv_heads (" +
               std::to_string(cache.numKvHeads()) + ")");
  const uint32_t numSeqs = cache.numSeqs();
  std::vector<int32_t> qIndptr;
  if (qIndptrObj.is_none()) {
    if (numSeqs == 1)
      qIndptr = {0, int32_t(rows)};
    else if (rows == int64_t(numSeqs))
      for (uint32_t s = 0; s <= numSeqs; ++s)
        qIndptr.push_back(int32_t(s));
    else
      valueError("q_indptr: required when q's rows (" + std::to_string(rows) +
                 ") are neither one per sequence (" + std::to_string(numSeqs) +
                 ") nor all of a one-sequence cache");
  } else {
    qIndptr = intVector(qIndptrObj, "q_indptr");
  }
  if (qIndptr.size() != numSeqs + 1 || qIndptr[0] != 0 ||
      int64_t(qIndptr.back()) != rows)
    valueError("q_indptr: expected " + std::to_string(numSeqs + 1) +
               " offsets from 0 to q's rows (" + std::to_string(rows) +
               "), got " + std::to_string(qIndptr.size()) + " offsets" +
               (qIndptr.empty() ? std::string()
                                : " from " + std::to_string(qIndptr[0]) +
                                      " to " + std::to_string(qIndptr.back())));
  std::vector<int64_t> lengths = cache.lengths();
  int64_t maxLen = 0;
  for (uint32_t s = 0; s < numSeqs; ++s) {
    if (qIndptr[s + 1] < qIndptr[s])
      valueError("q_indptr: offsets must not decrease (" +
                 std::to_string(qIndptr[s]) + " then " +
                 std::to_string(qIndptr[s + 1]) + ")");
    int64_t m = qIndptr[s + 1] - qIndptr[s];
    if (causal && m > lengths[s])
      valueError("q: sequence " + std::to_string(s) + " has " +
                 std::to_string(m) + " causal queries but holds only " +
                 std::to_string(lengths[s]) + " tokens (queries are its last "
                 "positions)");
    maxLen = std::max(maxLen, lengths[s]);
  }
  if (window < 0 || window > std::numeric_limits<int32_t>::max())
    valueError("window: expected >= 0, got " + std::to_string(window));
  if (!(softcap >= 0.0 && softcap <= 1.0e6))
    valueError("softcap: expected a finite value in [0, 1e6], got " +
               std::to_string(softcap));
  if (!(scale >= 0.0 && std::isfinite(scale)))
    valueError("scale: expected a finite value >= 0 (0: 1/sqrt(head_dim)), "
               "got " + std::to_string(scale));
  out.rows = rows;
  out.heads = heads;
  out.maxLen = maxLen;
  out.qIndptr = std::move(qIndptr);
  out.lengths = std::move(lengths);
  return out;
}

/// The caller's `out` (checked against q's shape) or a new float32 array.
std::pair<Array, nb::object> outputArray(nb::handle outObj,
                                         const Queries &queries,
                                         uint32_t headDim) {
  std::vector<int64_t> shape = {queries.rows, queries.heads, int64_t(headDim)};
  if (outObj.is_none()) {
    auto a = newArray<float>(
        {size_t(queries.rows), size_t(queries.heads), size_t(headDim)});
    nb::object o = nb::cast(a);
    return {nb::cast<Array>(o), o};
  }
  Array out = asArray<Array>(outObj, "out", true);
  checkArray(out, "out", dt<float>(), shape);
  return {out, nb::borrow(outObj)};
}

nb::object attention(Runtime &runtime, KVCache &cache, nb::handle qObj,
                     nb::handle qIndptrObj, nb::handle outObj, bool causal,
                     int64_t window, double softcap, double scale,
                     nb::handle maskObj, nb::handle slopesObj,
                     nb::handle sinksObj, bool engine) {
  Queries queries =
      checkQueries(cache, qObj, qIndptrObj, causal, window, softcap, scale);
  const RoArray &q = queries.q;
  const int64_t rows = queries.rows, heads = queries.heads,
                maxLen = queries.maxLen;
  const uint32_t numSeqs = cache.numSeqs();
  const std::vector<int32_t> &qIndptr = queries.qIndptr;
  const std::vector<int64_t> &lengths = queries.lengths;
  std::pair<Array, nb::object> output =
      outputArray(outObj, queries, cache.headDim());
  Array &out = output.first;
  nb::object &outResult = output.second;

  // Engine-grade options.
  RoArray maskIn, slopes, sinks;
  std::vector<uint16_t> mask; // f16 bits [rows][stride]
  uint32_t maskStride = 0;
  const bool haveMask = !maskObj.is_none();
  if (!engine && (haveMask || !slopesObj.is_none() || !sinksObj.is_none()))
    valueError("mask, slopes and sinks need tq_attention_v1, i.e. a library "
               "compiled with abi='ggml' (this one is a plain runtime "
               "library)");
  if (engine) {
    if (!slopesObj.is_none()) {
      slopes = asArray<RoArray>(slopesObj, "slopes", false);
      checkArray(slopes, "slopes", dt<float>(), {heads});
      if (!haveMask)
        valueError("slopes: ALiBi slopes multiply the mask; give a mask too");
    }
    if (!sinksObj.is_none()) {
      sinks = asArray<RoArray>(sinksObj, "sinks", false);
      checkArray(sinks, "sinks", dt<float>(), {heads});
    }
    if (haveMask) {
      maskIn = asArray<RoArray>(maskObj, "mask", false);
      if (maskIn.ndim() != 2 || int64_t(maskIn.shape(0)) != rows ||
          int64_t(maskIn.shape(1)) < maxLen)
        valueError("mask: expected shape (" + std::to_string(rows) +
                   ", >= " + std::to_string(maxLen) +
                   ") (q rows x at least the longest sequence's tokens), "
                   "got " + shapeString(maskIn));
      if (maskIn.dtype() != dt<float>() &&
          !(maskIn.dtype().code == uint8_t(nb::dlpack::dtype_code::Float) &&
            maskIn.dtype().bits == 16 && maskIn.dtype().lanes == 1))
        typeError("mask: expected dtype float16 or float32, got " +
                  dtypeName(maskIn.dtype()));
      checkArray(maskIn, "mask", maskIn.dtype(), {rows, -1});
    }
    if ((causal || window) || haveMask) {
      maskStride = uint32_t(haveMask ? maskIn.shape(1)
                                     : std::max<int64_t>(maxLen, 1));
      mask.assign(size_t(rows) * maskStride, kHalfZero);
      if (haveMask) {
        if (maskIn.dtype() == dt<float>()) {
          const float *m = (const float *)maskIn.data();
          for (size_t i = 0; i < mask.size(); ++i)
            mask[i] = tq::quant::floatToHalf(m[i]);
        } else {
          std::memcpy(mask.data(), maskIn.data(), mask.size() * 2);
        }
      }
      if (causal || window)
        for (uint32_t s = 0; s < numSeqs; ++s) {
          int64_t m = qIndptr[s + 1] - qIndptr[s], n = lengths[s];
          for (int64_t i = 0; i < m; ++i) {
            int64_t pos = n - m + i; // the query's position
            uint16_t *row = &mask[size_t(qIndptr[s] + i) * maskStride];
            for (int64_t t = 0; t < n; ++t)
              if ((causal && t > pos) || (window && pos - t >= window))
                row[t] = kHalfNegInf;
          }
        }
    }
  }

  CallResult r;
  bool closed = false;
  {
    nb::gil_scoped_release release;
    std::unique_lock<std::mutex> lock;
    tq_runtime *rt = runtime.acquire(lock);
    closed = !rt;
    if (rt) {
      std::lock_guard<std::mutex> cacheLock(cache.mutex());
      tq_kv_cache_v0 c = cache.descriptor();
      if (engine) {
        tq_attention_params_v1 p{};
        p.version = TQ_ATTENTION_PARAMS_VERSION_1;
        p.size = sizeof p;
        p.num_q_heads = uint32_t(heads);
        p.scale = float(scale);
        p.softcap = float(softcap);
        p.mask_row_stride = maskStride;
        p.q_indptr = qIndptr.data();
        p.mask = mask.empty() ? nullptr : mask.data();
        p.slopes = slopes.is_valid() ? (const float *)slopes.data() : nullptr;
        p.sinks = sinks.is_valid() ? (const float *)sinks.data() : nullptr;
        r = runtimeCall([&] {
          return tq_attention_v1(rt, &c, &p, (const float *)q.data(),
                                 (float *)out.data());
        });
      } else {
        tq_attention_params_v0 p{};
        p.version = TQ_ATTENTION_PARAMS_VERSION_0;
        p.size = sizeof p;
        p.num_q_heads = uint32_t(heads);
        p.causal = causal;
        p.window = uint32_t(window);
        p.softcap = float(softcap);
        p.scale = float(scale);
        p.q_indptr = qIndptr.data();
        r = runtimeCall([&] {
          return tq_attention(rt, &c, &p, (const float *)q.data(),
                              (float *)out.data());
        });
      }
    }
  }
  if (closed)
    closedError("Runtime.attention");
  check(r, engine ? "tq_attention_v1" : "tq_attention");
  return outResult;
}

//===----------------------------------------------------------------------===//
// GPU runtime
//===----------------------------------------------------------------------===//

/// A tq_gpu_runtime, shared with the device caches made on it (they free
/// their pools through it while it is open).
struct GpuState {
  tq_gpu_runtime *rt = nullptr;
  std::mutex mutex;
  /// Device scratch for q and out, grown on use.
  void *q = nullptr, *out = nullptr;
  size_t qBytes = 0, outBytes = 0;
};

/// (Re)allocates device buffer `ptr` to hold `bytes`; status of the call.
tq_status ensureDevice(tq_gpu_runtime *rt, void *&ptr, size_t &have,
                       size_t bytes) {
  if (bytes <= have)
    return TQ_STATUS_OK;
  if (ptr)
    tq_gpu_free(rt, ptr);
  ptr = nullptr;
  have = 0;
  tq_status s = tq_gpu_malloc(rt, bytes, &ptr);
  if (s == TQ_STATUS_OK)
    have = bytes;
  return s;
}

/// Runs `call(rt)` under the GPU runtime's lock with the GIL released;
/// raises ValueError when the runtime is closed (naming `what`) and
/// TQError for a failed status (naming `entry`).
template <typename F>
void gpuCall(GpuState &st, const char *what, const char *entry, F &&call) {
  CallResult r;
  bool closed = false;
  {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(st.mutex);
    closed = !st.rt;
    if (!closed)
      r = runtimeCall([&] { return call(st.rt); });
  }
  if (closed)
    closedError(what);
  check(r, entry);
}

class GpuRuntime {
public:
  GpuRuntime(const std::string &libraryDir, const std::string &backend,
             int64_t device, int64_t splits, const std::string &driver)
      : dir_(libraryDir), driver_(driver),
        state_(std::make_shared<GpuState>()) {
    uint32_t b = backend == "cuda"  ? TQ_BACKEND_CUDA
                 : backend == "hip" ? TQ_BACKEND_HIP
                                    : 0;
    if (!b)
      valueError("backend: expected 'cuda' or 'hip', got '" + backend + "'");
    if (device < 0 || device > std::numeric_limits<int32_t>::max())
      valueError("device: expected an ordinal >= 0, got " +
                 std::to_string(device));
    if (splits < 0 || splits > 64)
      valueError("splits: expected 0 (chosen per call) to 64, got " +
                 std::to_string(splits));
    tq_gpu_options_v0 o = {TQ_GPU_OPTIONS_VERSION_0,
                           sizeof o,
                           b,
                           int32_t(device),
                           dir_.c_str(),
                           driver_.empty() ? nullptr : driver_.c_str(),
                           uint32_t(splits),
                           0};
    CallResult r;
    const char *what = "tq_gpu_runtime_create";
    char name[256] = {0};
    {
      nb::gil_scoped_release release;
      r = runtimeCall(
          [&] { return tq_gpu_runtime_create(&o, nullptr, &state_->rt); });
      if (r.status == TQ_STATUS_OK) {
        what = "tq_gpu_device_name";
        r = runtimeCall(
            [&] { return tq_gpu_device_name(state_->rt, name, sizeof name); });
      }
    }
    if (r.status != TQ_STATUS_OK)
      close();
    check(r, what);
    deviceName_ = name;
  }
  ~GpuRuntime() { close(); }
  GpuRuntime(const GpuRuntime &) = delete;
  GpuRuntime &operator=(const GpuRuntime &) = delete;

  void close() {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (!state_->rt)
      return;
    for (void *p : {state_->q, state_->out, flush_})
      if (p)
        tq_gpu_free(state_->rt, p);
    state_->q = state_->out = flush_ = nullptr;
    flushBytes_ = 0;
    state_->qBytes = state_->outBytes = 0;
    tq_gpu_runtime_destroy(state_->rt);
    state_->rt = nullptr;
  }
  bool closed() const { return state_->rt == nullptr; }
  const std::string &deviceName() const { return deviceName_; }

  /// Writes `bytes` to device scratch (the tuner's cache flush: the copy
  /// lands in L2 and evicts what a timed call would find there).
  void flush(int64_t bytes) {
    if (bytes <= 0)
      valueError("flush: expected a positive byte count, got " +
                 std::to_string(bytes));
    if (flushHost_.size() < size_t(bytes))
      flushHost_.assign(size_t(bytes), 1);
    gpuCall(*state_, "GpuRuntime.flush", "tq_gpu_copy_to_device",
            [&](tq_gpu_runtime *rt) {
              tq_status s =
                  ensureDevice(rt, flush_, flushBytes_, size_t(bytes));
              return s == TQ_STATUS_OK
                         ? tq_gpu_copy_to_device(rt, flush_, flushHost_.data(),
                                                 size_t(bytes))
                         : s;
            });
  }
  const std::string &libraryDir() const { return dir_; }
  const std::shared_ptr<GpuState> &state() const { return state_; }

private:
  std::string dir_, driver_, deviceName_;
  std::shared_ptr<GpuState> state_;
  std::vector<uint8_t> flushHost_;
  void *flush_ = nullptr;
  size_t flushBytes_ = 0;
};

/// Device copies of a KVCache's K and V pools; the page table stays the
/// host cache's (the GPU runtime uploads it per call).
class GpuKVCache {
public:
  GpuKVCache(GpuRuntime &runtime, KVCache &cache)
      : state_(runtime.state()), cache_(&cache) {
    kBytes_ = poolBytes(cache.kRowBytes());
    vBytes_ = poolBytes(cache.vRowBytes());
    sync();
  }
  ~GpuKVCache() { release(); }
  GpuKVCache(const GpuKVCache &) = delete;
  GpuKVCache &operator=(const GpuKVCache &) = delete;

  /// Copies the host cache's pools to the device again (after appends).
  void sync() {
    gpuCall(*state_, "GpuKVCache.sync", "tq_gpu_copy_to_device",
            [&](tq_gpu_runtime *rt) {
              std::lock_guard<std::mutex> cacheLock(cache_->mutex());
              tq_kv_cache_v0 c = cache_->descriptor();
              tq_status s = ensureDevice(rt, k_, kHave_, kBytes_);
              if (s == TQ_STATUS_OK)
                s = ensureDevice(rt, v_, vHave_, vBytes_);
              if (s == TQ_STATUS_OK)
                s = tq_gpu_copy_to_device(rt, k_, c.k_pages, kBytes_);
              if (s == TQ_STATUS_OK)
                s = tq_gpu_copy_to_device(rt, v_, c.v_pages, vBytes_);
              return s;
            });
  }

  KVCache &host() const { return *cache_; }
  void *kPool() const { return k_; }
  void *vPool() const { return v_; }
  const std::shared_ptr<GpuState> &state() const { return state_; }

private:
  size_t poolBytes(uint32_t rowBytes) const {
    return size_t(cache_->numPages()) * cache_->pageSize() *
           cache_->numKvHeads() * rowBytes;
  }
  void release() {
    std::lock_guard<std::mutex> lock(state_->mutex);
    // A closed runtime released its context and the pools with it.
    if (state_->rt)
      for (void *p : {k_, v_})
        if (p)
          tq_gpu_free(state_->rt, p);
    k_ = v_ = nullptr;
  }

  std::shared_ptr<GpuState> state_;
  KVCache *cache_;
  void *k_ = nullptr, *v_ = nullptr;
  size_t kBytes_ = 0, vBytes_ = 0, kHave_ = 0, vHave_ = 0;
};

/// tq_gpu_attention over `cache`'s device pools: q is uploaded, the output
/// downloaded into `out` (host arrays, as Runtime.attention takes them).
nb::object gpuAttention(GpuRuntime &runtime, GpuKVCache &cache,
                        nb::handle qObj, nb::handle qIndptrObj,
                        nb::handle outObj, bool causal, int64_t window,
                        double softcap, double scale) {
  if (cache.state() != runtime.state())
    valueError("cache: a GpuKVCache of another GpuRuntime");
  KVCache &host = cache.host();
  Queries queries =
      checkQueries(host, qObj, qIndptrObj, causal, window, softcap, scale);
  std::pair<Array, nb::object> output =
      outputArray(outObj, queries, host.headDim());
  const size_t bytes =
      size_t(queries.rows) * size_t(queries.heads) * host.headDim() * 4;
  // No queries: nothing is copied, but the runtime still looks its kernel
  // up (with valid pointers).
  const size_t allocated = std::max<size_t>(bytes, 4);
  GpuState &st = *runtime.state();
  gpuCall(st, "GpuRuntime.attention", "tq_gpu_attention",
          [&](tq_gpu_runtime *rt) {
            std::lock_guard<std::mutex> cacheLock(host.mutex());
            tq_kv_cache_v0 c = host.descriptor();
            c.k_pages = static_cast<uint8_t *>(cache.kPool());
            c.v_pages = static_cast<uint8_t *>(cache.vPool());
            tq_attention_params_v0 p{};
            p.version = TQ_ATTENTION_PARAMS_VERSION_0;
            p.size = sizeof p;
            p.num_q_heads = uint32_t(queries.heads);
            p.causal = causal;
            p.window = uint32_t(window);
            p.softcap = float(softcap);
            p.scale = float(scale);
            p.q_indptr = queries.qIndptr.data();
            tq_status s = ensureDevice(rt, st.q, st.qBytes, allocated);
            if (s == TQ_STATUS_OK)
              s = ensureDevice(rt, st.out, st.outBytes, allocated);
            if (s == TQ_STATUS_OK && bytes)
              s = tq_gpu_copy_to_device(rt, st.q, queries.q.data(), bytes);
            if (s == TQ_STATUS_OK)
              s = tq_gpu_attention(rt, &c, &p, static_cast<float *>(st.q),
                                   static_cast<float *>(st.out));
            if (s == TQ_STATUS_OK && bytes)
              s = tq_gpu_copy_to_host(rt, output.first.data(), st.out, bytes);
            return s;
          });
  return output.second;
}

} // namespace

NB_MODULE(_tqc, m) {
  m.doc() = "tqc's native bindings (use the tqc package, not this module).";

  nb::module_ builtins = nb::module_::import_("builtins");
  nb::dict ns;
  ns["__builtins__"] = builtins;
  ns["__name__"] = "tqc";
  // tqc.TQError: a runtime status, with .status (its name) and .code.
  nb::exec(R"(
class TQError(RuntimeError):
    """A tqc runtime call failed: the message names the call, the status
    and what tq_last_error() said; .status is the status's name
    (e.g. 'TQ_STATUS_NOT_FOUND') and .code its value."""
    def __init__(self, message, status="", code=0):
        super().__init__(message)
        self.status = status
        self.code = code

class CompileError(RuntimeError):
    """Compiling a kernel library failed; the message is the compiler's
    (the kernel and the diagnostics)."""
)", ns);
  tqErrorType = ns["TQError"];
  compileErrorType = ns["CompileError"];
  m.attr("TQError") = tqErrorType;
  m.attr("CompileError") = compileErrorType;
  m.attr("ABI_VERSION") = tq_runtime_abi_version();

  m.def("formats", &formats,
        "Every format name lib/Quant knows, with a one-line summary.");
  m.def("format_info", &formatInfo, "name"_a, "head_dim"_a,
        "Row bytes, bits per value, padded dim, block length and whether "
        "the format rotates, for rows of head_dim values.");
  m.def("encode", &encode, "rows"_a, "format"_a,
        "Encodes float32 rows [..., head_dim] into [..., row_bytes] uint8 "
        "with lib/Quant's encoder (the bytes the runtime's append kernels "
        "write).");
  m.def("decode", &decode, "data"_a, "format"_a, "head_dim"_a,
        "rotated"_a = false,
        "Decodes [..., row_bytes] uint8 rows of `format` back to float32 "
        "[..., head_dim] (rotated=True: the rotated domain, [..., "
        "padded_dim], no inverse rotation).");
  m.def("reference_attention", &referenceAttention, "q"_a, "k"_a, "v"_a,
        "k_format"_a.none() = nb::none(), "v_format"_a.none() = nb::none(),
        "head_dim"_a = 0, "v_head_dim"_a = 0, "scale"_a = 0.0,
        "causal"_a = false, "window"_a = 0, "softcap"_a = 0.0,
        "mask"_a.none() = nb::none(), "slopes"_a.none() = nb::none(),
        "sinks"_a.none() = nb::none(),
        "lib/Quant's reference attention in double precision.");

  m.def("kernel_name", &specName, "spec"_a,
        "The symbol name of a kernel spec tuple.");
  m.def("compile_library", &compileLibrary, "specs"_a, "output_dir"_a,
        "target"_a, "cpu"_a, "decode_tile"_a, "prefill_tile"_a, "splits"_a,
        "lookup"_a, "naive"_a, "library_name"_a,
        "progress"_a.none() = nb::none(), "max_unrolled_chunks"_a = 48,
        "centroid_permute"_a = "",
        "kernel_knobs"_a = std::map<std::string, mlir::tq::KnobValues>(),
        "tuning_db"_a = "", "tuning_context"_a = 0,
        "inputs"_a = std::vector<std::pair<std::string, std::string>>(),
        "gpu_device"_a = "", "jobs"_a = 0u,
        "Compiles kernel spec tuples into a library directory with tq-aot's "
        "driver (writeKernelLibrary / writeGpuKernelLibrary); returns the "
        "tuning database's report (one line per attention kernel).");
  m.attr("VERSION") = TQC_PY_VERSION;
  m.def("kernel_knobs", &kernelKnobs, "spec"_a, "cpu"_a = "host",
        "target"_a = "cpu",
        "The knobs of a kernel spec tuple on a CPU (mlir::tq::kernelKnobs) "
        "or a GPU chip (mlir::tq::gpuKernelKnobs).");
  m.def("tuning_target", &tuningTarget, "cpu"_a = "host", "target"_a = "cpu",
        "device"_a = "",
        "The tuning database key of a CPU target, or of a GPU chip on a "
        "device: triple, cpu, features, features_hash.");
  m.def("context_bucket", &mlir::tq::contextBucket, "tokens"_a,
        "The context-length bucket of a context: the power of two >= it.");
  m.def("lookup_tuning_record", &lookupTuningRecord, "database"_a,
        "version"_a, "cpu"_a, "spec"_a, "context"_a = 0, "target"_a = "cpu",
        "device"_a = "",
        "tq-aot --tuning-db's lookup: the best correct record (id, context, "
        "seconds, knobs) or None.");

  nb::class_<Runtime>(m, "Runtime",
                      "A loaded kernel library and its thread pool "
                      "(tq_runtime_create).")
      .def(nb::init<const std::string &, uint32_t>(), "library_path"_a,
           "threads"_a = 0)
      .def("close", &Runtime::close,
           "Destroys the runtime (tq_runtime_destroy); later calls raise.")
      .def_prop_ro("closed", &Runtime::closed)
      .def_prop_ro("library_path", &Runtime::path)
      .def("attention", &attention, "cache"_a, "q"_a,
           "q_indptr"_a.none() = nb::none(), "out"_a.none() = nb::none(),
           "causal"_a = false, "window"_a = 0, "softcap"_a = 0.0,
           "scale"_a = 0.0, "mask"_a.none() = nb::none(),
           "slopes"_a.none() = nb::none(), "sinks"_a.none() = nb::none(),
           "engine"_a = false,
           "Attention of every sequence's queries over the cache "
           "(tq_attention, or tq_attention_v1 when engine=True).");

  nb::class_<KVCache>(m, "KVCache",
                      "A paged or contiguous KV cache: pools, page table "
                      "and sequence lengths (tq_kv_cache_v0).")
      .def(nb::init<const std::string &, const std::string &, int64_t,
                    int64_t, const std::string &, int64_t, int64_t, int64_t,
                    nb::handle, nb::handle, bool>(),
           "k_format"_a, "v_format"_a, "head_dim"_a, "num_kv_heads"_a,
           "layout"_a, "page_size"_a, "num_pages"_a, "num_seqs"_a,
           "k_pages"_a.none() = nb::none(), "v_pages"_a.none() = nb::none(),
           "head_major"_a = false)
      .def("append", &KVCache::append, "runtime"_a, "k"_a, "v"_a, "seq"_a,
           "start"_a.none() = nb::none())
      .def("truncate", &KVCache::truncate, "seq"_a, "length"_a)
      .def("rows", &KVCache::rows, "seq"_a)
      .def("pages", &KVCache::pages, "seq"_a)
      .def_prop_ro("lengths", &KVCache::lengths)
      .def_prop_ro("free_pages", &KVCache::freePages)
      .def_prop_ro("k_pages", &KVCache::kPagesObject)
      .def_prop_ro("v_pages", &KVCache::vPagesObject)
      .def_prop_ro("k_format", &KVCache::kFormat)
      .def_prop_ro("v_format", &KVCache::vFormat)
      .def_prop_ro("head_dim", &KVCache::headDim)
      .def_prop_ro("num_kv_heads", &KVCache::numKvHeads)
      .def_prop_ro("page_size", &KVCache::pageSize)
      .def_prop_ro("num_pages", &KVCache::numPages)
      .def_prop_ro("num_seqs", &KVCache::numSeqs)
      .def_prop_ro("k_row_bytes", &KVCache::kRowBytes)
      .def_prop_ro("v_row_bytes", &KVCache::vRowBytes)
      .def_prop_ro("layout", &KVCache::layout)
      .def_prop_ro("head_major", &KVCache::headMajor);

  nb::class_<GpuRuntime>(m, "GpuRuntime",
                         "tq_gpu_runtime over a GPU kernel library.")
      .def(nb::init<const std::string &, const std::string &, int64_t,
                    int64_t, const std::string &>(),
           "library_dir"_a, "backend"_a, "device"_a = 0, "splits"_a = 0,
           "driver"_a = "")
      .def("close", &GpuRuntime::close)
      .def_prop_ro("closed", &GpuRuntime::closed)
      .def_prop_ro("device_name", &GpuRuntime::deviceName)
      .def_prop_ro("library_dir", &GpuRuntime::libraryDir)
      .def("flush", &GpuRuntime::flush, "bytes"_a)
      .def("attention", &gpuAttention, "cache"_a, "q"_a, "q_indptr"_a.none(),
           "out"_a.none(), "causal"_a, "window"_a, "softcap"_a, "scale"_a);
  nb::class_<GpuKVCache>(m, "GpuKVCache",
                         "Device copies of a KVCache's pools.")
      .def(nb::init<GpuRuntime &, KVCache &>(), "runtime"_a, "cache"_a,
           nb::keep_alive<1, 2>(), nb::keep_alive<1, 3>())
      .def("sync", &GpuKVCache::sync);
}
