//===- TQAttrs.td - Attributes of the tq dialect -----------*- tablegen -*-===//

#ifndef TQ_DIALECT_TQ_IR_TQATTRS_TD
#define TQ_DIALECT_TQ_IR_TQATTRS_TD

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/CommonAttrConstraints.td"
include "tq/Dialect/TQ/IR/TQDialect.td"
include "tq/Dialect/TQ/IR/TQEnums.td"

class TQ_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<TQ_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def TQ_FormatAttr : TQ_Attr<"Format", "format"> {
  let summary = "A compressed KV block format";
  let description = [{
    Names one of the block formats of tqc's format library (run
    `tq-quant formats` for the list). Together with a head dim, the name
    fixes every byte of a row: block length, scale rule and type, index bit
    planes, codebook, rotation and the optional QJL residual. Those
    constants are read from the library when a pass needs them, never
    re-typed in IR.

    Example:

    ```mlir
    #tq.format<"turbo3_0">
    #tq.format<"polar4">
    ```
  }];
  let parameters = (ins StringRefParameter<"format name">:$name);
  let assemblyFormat = "`<` $name `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The library format for rows of `headDim` values; fails (emitting
    /// through `emitError` when given) if the format cannot take that dim.
    ::mlir::FailureOr<::tq::quant::Format> getFormat(
        unsigned headDim,
        ::llvm::function_ref<::mlir::InFlightDiagnostic()> emitError = {})
        const;
  }];
}

def TQ_CodebookAttr : TQ_Attr<"Codebook", "codebook"> {
  let summary = "A scalar codebook: sorted centroids and thresholds";
  let description = [{
    `2^bits` strictly increasing centroids and `2^bits - 1` non-decreasing
    decision thresholds; a value quantises to the first cell whose
    threshold it is below (ties go up).

    Example:

    ```mlir
    #tq.codebook<bits = 1, centroids = [-0.5, 0.5],
                 thresholds = [0.0]>
    ```
  }];
  let parameters = (ins "unsigned":$bits,
                        "::mlir::DenseF32ArrayAttr":$centroids,
                        "::mlir::DenseF32ArrayAttr":$thresholds);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The codebook of a library format.
    static CodebookAttr get(::mlir::MLIRContext *context,
                            const ::tq::quant::Codebook &codebook);
  }];
}

def TQ_RotationAttr : TQ_Attr<"Rotation", "rotation"> {
  let summary = "An orthogonal rotation of the last dimension";
  let description = [{
    One of the rotations a format applies before quantising:

    - `identity`;
    - `hadamard`: `S2 . H_n / sqrt(n) . S1` with n = `dim` a power of two
      and sign vectors `signs1` (required) and `signs2` (optional);
    - `block_hadamard`: the same `block`-point transform on each of
      `dim / block` consecutive blocks;
    - `haar`: a dense Haar-random rotation drawn from `seed`.

    Every kind is orthogonal, so the inverse is the transpose.

    Example:

    ```mlir
    #tq.rotation<kind = hadamard, dim = 4, block = 4,
                 signs1 = [1, -1, 1, 1]>
    #tq.rotation<kind = haar, dim = 80, seed = 7>
    ```
  }];
  let parameters = (ins
    EnumParameter<TQ_RotationKind>:$kind,
    "unsigned":$dim,
    DefaultValuedParameter<"unsigned", "0">:$block,
    OptionalParameter<"::mlir::DenseI8ArrayAttr">:$signs1,
    OptionalParameter<"::mlir::DenseI8ArrayAttr">:$signs2,
    DefaultValuedParameter<"uint64_t", "0">:$seed
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The attribute describing a library rotation.
    static RotationAttr get(::mlir::MLIRContext *context,
                            const ::tq::quant::Rotation &rotation);
    /// The library rotation this attribute describes (verified attributes
    /// always materialise).
    ::tq::quant::Rotation materialize() const;
    bool isIdentity() const { return getKind() == RotationKind::identity; }
  }];
}

#endif // TQ_DIALECT_TQ_IR_TQATTRS_TD
