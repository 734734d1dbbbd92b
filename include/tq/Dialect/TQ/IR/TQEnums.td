//===- TQEnums.td - Enums of the tq dialect ----------------*- tablegen -*-===//

#ifndef TQ_DIALECT_TQ_IR_TQENUMS_TD
#define TQ_DIALECT_TQ_IR_TQENUMS_TD

include "mlir/IR/EnumAttr.td"
include "tq/Dialect/TQ/IR/TQDialect.td"

def TQ_RotationKind : I32EnumAttr<"RotationKind",
    "family of an orthogonal rotation", [
      I32EnumAttrCase<"identity", 0>,
      I32EnumAttrCase<"hadamard", 1>,
      I32EnumAttrCase<"block_hadamard", 2>,
      I32EnumAttrCase<"haar", 3>
    ]> {
  let cppNamespace = "::mlir::tq";
  let genSpecializedAttr = 0;
}

def TQ_LookupStrategy : I32EnumAttr<"LookupStrategy",
    "how fused ops read centroids", [
      I32EnumAttrCase<"select", 0>,
      I32EnumAttrCase<"lut", 1>,
      I32EnumAttrCase<"tile", 2>
    ]> {
  let cppNamespace = "::mlir::tq";
  let genSpecializedAttr = 0;
}

def TQ_LookupStrategyAttr
    : EnumAttr<TQ_Dialect, TQ_LookupStrategy, "lookup"> {
  let assemblyFormat = "`<` $value `>`";
}

#endif // TQ_DIALECT_TQ_IR_TQENUMS_TD
