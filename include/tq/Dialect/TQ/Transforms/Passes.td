//===- Passes.td - Transformations of the tq dialect -------*- tablegen -*-===//

#ifndef TQ_DIALECT_TQ_TRANSFORMS_PASSES_TD
#define TQ_DIALECT_TQ_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def TQDecomposeAttention : Pass<"tq-decompose-attention"> {
  let summary = "Spell tq.attention out step by step, dequantising naively";
  let description = [{
    Rewrites each `tq.attention` into the naive computation over dequantised
    keys and values:

    ```mlir
    %o = tq.attention %q, %k, %v : ...
    ```
    becomes
    ```mlir
    %kg = tq.gather %k            // scale * C[idx], rotated domain
    %kr = tq.rotate %kg {rotation = R_k, inverse}
    %kd = tensor.extract_slice %kr[0, 0, 0] [N, KH, D] [1, 1, 1]  // if padded
    %s  = tq.qk %q, %kd
    %p  = tq.softmax %s {scale, causal, window, softcap}
    ... the same for %v ...
    %o  = tq.pv %p, %vd
    ```

    Every key and value is un-rotated: `tokens x kv_heads` rotations per
    cache. `tq-hoist-rotation` then moves them to the query and output.
  }];
  let dependentDialects = ["::mlir::tensor::TensorDialect"];
}

def TQHoistRotation : Pass<"tq-hoist-rotation"> {
  let summary = "Move rotations off the K/V side onto the query and output";
  let description = [{
    For any orthogonal R and a cache gathered in the rotated domain G:

    - `<q, slice(R^T G)> = <R pad(q), G>`: a key-side rotation (and the
      slice of a zero-padded head) becomes one rotation of each zero-padded
      query row;
    - `sum_t p_t slice(R^T G_t) = slice(R^T sum_t p_t G_t)`: a value-side
      rotation becomes one rotation of each output row.

    ```mlir
    %kr = tq.rotate %kg {rotation = R, inverse} : tensor<?x2x128xf32>
    %kd = tensor.extract_slice %kr[0, 0, 0] [%n, 2, 96] [1, 1, 1]
    %s  = tq.qk %q, %kd
    ```
    becomes
    ```mlir
    %qp = tensor.pad %q low[0, 0, 0] high[0, 0, 32] { 0.0 }
    %qr = tq.rotate %qp {rotation = R} : tensor<1x8x128xf32>
    %s  = tq.qk %qr, %kg
    ```

    The identity needs the slice to keep the leading `head_dim` entries of
    every row (what zero padding produces). Where a rotation feeds a
    `tq.qk` or `tq.pv` through anything else (a `tensor.cast` included),
    the pass leaves it and emits a remark saying why.

    Dynamic sizes: a query whose head dim is dynamic is cast to the keys'
    static one (qk requires them equal) and padded statically; where
    neither knows it, the padding is `dim - size(q)`, computed. A value
    output keeps the head dim the values' slice kept (its SSA size when
    dynamic) and is cast to the `tq.pv` result type.
  }];
  let dependentDialects = ["::mlir::tensor::TensorDialect",
                           "::mlir::arith::ArithDialect"];
}

def TQFuseCodebook : Pass<"tq-fuse-codebook"> {
  let summary = "Score and accumulate by codebook lookup on the packed cache";
  let description = [{
    Replaces dense products with gathered caches by the fused ops that read
    packed indices directly:

    - `tq.qk %qr, (tq.gather %k)` becomes `tq.score %qr, %k`;
    - `tq.pv %p, (tq.gather %v)` becomes `tq.accumulate %p, %v`.

    The `lookup` option picks how the fused ops read centroids: `select`
    (codebook in registers) or `lut` (a per-query table).
  }];
  let options = [
    Option<"lookup", "lookup", "::mlir::tq::LookupStrategy",
           "::mlir::tq::LookupStrategy::select",
           "How centroids are read: select or lut",
           [{::llvm::cl::values(
               clEnumValN(::mlir::tq::LookupStrategy::select, "select",
                          "keep the codebook in registers and select"),
               clEnumValN(::mlir::tq::LookupStrategy::lut, "lut",
                          "build a per-query lookup table"),
               clEnumValN(::mlir::tq::LookupStrategy::tile, "tile",
                          "decode each KV tile once into a dense buffer "
                          "shared by the GQA group"))}]>
  ];
}

def TQTileFlashAttention : Pass<"tq-tile-flash-attention"> {
  let summary = "KV-tiled attention with an online softmax, optionally split-KV";
  let description = [{
    Rewrites the fused chain

    ```mlir
    %s = tq.score %qr, %k
    %p = tq.softmax %s {...}
    %a = tq.accumulate %p, %v
    ```

    into a loop over KV tiles of `tile-size` tokens (the last one clamped)
    carrying the running row maximum, row sum and accumulator:

    ```mlir
    scf.for %t0 = %c0 to %n step %T iter_args(%m, %l, %acc) {
      %kt = tq.slice_tokens %k[%t0, %size]
      %st = tq.score %qr, %kt
      %pt, %m1, %l1, %c = tq.online_softmax %st, %m, %l, %t0, %n {...}
      %at = tq.accumulate %pt, %vt
      %acc1 = tq.merge_tile %acc, %c, %at
      scf.yield %m1, %l1, %acc1
    }
    %a = tq.normalize %acc, %l
    ```

    Each tile of packed K/V rows is scored against every query head, so
    one tile serves a whole GQA group. With `splits > 1` the token range is
    cut into that many chunks, each tiled independently inside an
    `scf.forall` (flash-decoding), and `tq.combine` merges the partial
    (max, sum, accumulator) triples by log-sum-exp.

    A softmax's `lse` result, when used, becomes `max + log(sum)` of the
    final state (of the merged splits' state with `splits > 1`).
  }];
  let options = [
    Option<"tileSize", "tile-size", "int64_t", /*default=*/"64",
           "Tokens per KV tile">,
    Option<"splits", "splits", "int64_t", /*default=*/"1",
           "Independent KV chunks merged by tq.combine (split-KV)">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::tensor::TensorDialect"];
}

#endif // TQ_DIALECT_TQ_TRANSFORMS_PASSES_TD
