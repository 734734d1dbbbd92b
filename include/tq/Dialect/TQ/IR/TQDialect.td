//===- TQDialect.td - The tq dialect -----------------------*- tablegen -*-===//
//
// The dialect of attention over a TurboQuant-compressed KV cache.
//
//===----------------------------------------------------------------------===//

#ifndef TQ_DIALECT_TQ_IR_TQDIALECT_TD
#define TQ_DIALECT_TQ_IR_TQDIALECT_TD

include "mlir/IR/OpBase.td"

def TQ_Dialect : Dialect {
  let name = "tq";
  let cppNamespace = "::mlir::tq";
  let summary = "Attention over compressed (TurboQuant) KV caches";
  let description = [{
    The `tq` dialect describes attention whose keys and values are stored in
    a compressed block format: each cached vector is rotated by an
    orthogonal transform R and replaced by codebook indices and a scale.
    Values of type `!tq.cache` hold such rows; `#tq.format` fixes every byte
    of a row, with its constants (codebook, rotation, layout) taken from
    tqc's format library at compile time.

    The ops span two levels. `tq.attention` states the whole computation.
    `tq.gather`, `tq.rotate`, `tq.qk`, `tq.softmax` and `tq.pv` spell it out
    step by step, which is where the rotation identity
    `<q, R^T k> = <R q, k>` is applied as a rewrite, and `tq.score` /
    `tq.accumulate` are the fused forms that read the packed cache directly
    in the rotated domain.
  }];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
  let extraClassDeclaration = [{
    /// Defined next to the storage classes (TQAttrs.cpp, TQTypes.cpp).
    void registerAttributes();
    void registerTypes();
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

class TQ_Op<string mnemonic, list<Trait> traits = []>
    : Op<TQ_Dialect, mnemonic, traits>;

#endif // TQ_DIALECT_TQ_IR_TQDIALECT_TD
