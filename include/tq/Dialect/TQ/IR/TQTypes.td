//===- TQTypes.td - Types of the tq dialect ----------------*- tablegen -*-===//

#ifndef TQ_DIALECT_TQ_IR_TQTYPES_TD
#define TQ_DIALECT_TQ_IR_TQTYPES_TD

include "mlir/IR/AttrTypeBase.td"
include "tq/Dialect/TQ/IR/TQAttrs.td"

def TQ_CacheType : TypeDef<TQ_Dialect, "Cache"> {
  let mnemonic = "cache";
  let summary = "A packed KV cache of one format";
  let description = [{
    `tokens x kv_heads x head_dim` logical values stored as one packed row
    per (token, head) in the given format. `head_dim` is the logical head
    dim; rows are padded to the format's padded dim internally. `tokens`
    may be dynamic (`?`). The bytes of a cache are a
    `tensor<tokens x kv_heads x row_bytes x i8>` (see `tq.from_bytes`).

    Example:

    ```mlir
    !tq.cache<?x8x128, #tq.format<"turbo3_0">>
    !tq.cache<4096x2x80, #tq.format<"polar4">>
    ```
  }];
  let parameters = (ins ArrayRefParameter<"int64_t">:$shape,
                        "FormatAttr":$format);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    int64_t getNumTokens() const { return getShape()[0]; }
    int64_t getNumKvHeads() const { return getShape()[1]; }
    unsigned getHeadDim() const { return unsigned(getShape()[2]); }
    /// The library format at this head dim (valid for verified types).
    ::tq::quant::Format getQuantFormat() const;
    unsigned getPaddedDim() const;
    int64_t getRowBytes() const;
    /// tensor<tokens x kv_heads x row_bytes x i8>.
    ::mlir::RankedTensorType getBytesType() const;
    /// tensor<tokens x kv_heads x padded_dim x f32>: the rotated domain.
    ::mlir::RankedTensorType getRotatedType() const;
    /// tensor<tokens x kv_heads x head_dim x f32>.
    ::mlir::RankedTensorType getValuesType() const;
  }];
}

#endif // TQ_DIALECT_TQ_IR_TQTYPES_TD
