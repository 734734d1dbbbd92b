//===- TQOps.td - Operations of the tq dialect -------------*- tablegen -*-===//

#ifndef TQ_DIALECT_TQ_IR_TQOPS_TD
#define TQ_DIALECT_TQ_IR_TQOPS_TD

include "mlir/IR/OpBase.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "tq/Dialect/TQ/IR/TQAttrs.td"
include "tq/Dialect/TQ/IR/TQEnums.td"
include "tq/Dialect/TQ/IR/TQTypes.td"

def TQ_F32Tensor3D : 3DTensorOf<[F32]>;
def TQ_F32Tensor2D : 2DTensorOf<[F32]>;
def TQ_F32Tensor1D : 1DTensorOf<[F32]>;
// An additive logit mask: f32, or f16 as engines store it (llama.cpp).
def TQ_MaskTensor : 2DTensorOf<[F16, F32]>;
def TQ_I8Tensor3D : 3DTensorOf<[I8]>;

//===----------------------------------------------------------------------===//
// Cache views
//===----------------------------------------------------------------------===//

def TQ_FromBytesOp : TQ_Op<"from_bytes", [Pure]> {
  let summary = "Views packed bytes as a typed cache";
  let description = [{
    Gives the bytes of a cache their format. The byte tensor is
    `tokens x kv_heads x row_bytes` with `row_bytes` the format's row size
    at the cache's head dim.

    ```mlir
    %k = tq.from_bytes %bytes : tensor<?x8x50xi8> -> !tq.cache<?x8x128, #tq.format<"turbo3_0">>
    ```
  }];
  let arguments = (ins TQ_I8Tensor3D:$bytes);
  let results = (outs TQ_CacheType:$cache);
  let assemblyFormat = "$bytes attr-dict `:` type($bytes) `->` qualified(type($cache))";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def TQ_ToBytesOp : TQ_Op<"to_bytes", [Pure]> {
  let summary = "The packed bytes of a typed cache";
  let description = [{
    The inverse of `tq.from_bytes`.

    ```mlir
    %bytes = tq.to_bytes %k : !tq.cache<?x8x128, #tq.format<"turbo3_0">> -> tensor<?x8x50xi8>
    ```
  }];
  let arguments = (ins TQ_CacheType:$cache);
  let results = (outs TQ_I8Tensor3D:$bytes);
  let assemblyFormat = "$cache attr-dict `:` qualified(type($cache)) `->` type($bytes)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def TQ_FromPagesOp : TQ_Op<"from_pages", [Pure]> {
  let summary = "Views a paged pool of rows as one sequence's cache";
  let description = [{
    `pages` is a pool of `num_pages x page_size x kv_heads x row_bytes`
    bytes; `table` lists the pages of one sequence in order (a CSR row of a
    page table). Token `t < num_tokens` lives in page `table[t / page_size]`
    at slot `t % page_size`, `page_size` being below 2^32. A contiguous
    cache is one page holding every token with `table = [0]`.

    ```mlir
    %k = tq.from_pages %pool[%table], %n : tensor<?x16x8x50xi8>, tensor<?xi32> -> !tq.cache<?x8x128, #tq.format<"turbo3_0">>
    ```
  }];
  let arguments = (ins 4DTensorOf<[I8]>:$pages, 1DTensorOf<[I32]>:$table,
                       Index:$num_tokens);
  let results = (outs TQ_CacheType:$cache);
  let assemblyFormat = [{
    $pages `[` $table `]` `,` $num_tokens attr-dict `:` type($pages) `,`
    type($table) `->` qualified(type($cache))
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Encoding and decoding
//===----------------------------------------------------------------------===//

def TQ_QuantizeOp : TQ_Op<"quantize", [Pure]> {
  let summary = "Encodes rows into a packed cache";
  let description = [{
    Encodes each of the `tokens x kv_heads` rows of `head_dim` values with
    the result's format (zero-padding, rotation, scale, codebook indices and
    QJL residual as the format prescribes).

    ```mlir
    %c = tq.quantize %rows : tensor<16x8x128xf32> -> !tq.cache<16x8x128, #tq.format<"polar3">>
    ```
  }];
  let arguments = (ins TQ_F32Tensor3D:$input);
  let results = (outs TQ_CacheType:$cache);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` qualified(type($cache))";
  let hasVerifier = 1;
}

def TQ_GatherOp : TQ_Op<"gather", [Pure]> {
  let summary = "Scaled centroids of every row, in the rotated domain";
  let description = [{
    Decodes each row to `scale * C[idx]` (plus the QJL reconstruction for
    formats with a residual) over the padded head dim, without the inverse
    rotation: `tokens x kv_heads x padded_dim`. The original-domain row is
    the inverse rotation of this, sliced to `head_dim`.

    ```mlir
    %g = tq.gather %k : !tq.cache<?x8x96, #tq.format<"turbo3_0">> -> tensor<?x8x128xf32>
    ```
  }];
  let arguments = (ins TQ_CacheType:$cache);
  let results = (outs TQ_F32Tensor3D:$result);
  let assemblyFormat = "$cache attr-dict `:` qualified(type($cache)) `->` type($result)";
  let hasVerifier = 1;
}

def TQ_RotateOp : TQ_Op<"rotate", [Pure, SameOperandsAndResultType]> {
  let summary = "Applies an orthogonal rotation (or its inverse) to the last dim";
  let description = [{
    `result[..., :] = R input[..., :]`, or `R^T input[..., :]` with
    `inverse`. The last dimension must equal the rotation's `dim`.

    ```mlir
    %r = tq.rotate %q {rotation = #tq.rotation<kind = hadamard, dim = 4, block = 4, signs1 = [1, -1, 1, 1]>} : tensor<1x2x4xf32>
    %x = tq.rotate %r {rotation = #tq.rotation<kind = haar, dim = 4, seed = 3>, inverse} : tensor<1x2x4xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[F32]>:$input, TQ_RotationAttr:$rotation,
                       UnitAttr:$inverse);
  let results = (outs RankedTensorOf<[F32]>:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

//===----------------------------------------------------------------------===//
// Step-by-step attention
//===----------------------------------------------------------------------===//

def TQ_QKOp : TQ_Op<"qk", [Pure]> {
  let summary = "Dot products of queries with dense keys (GQA by shape)";
  let description = [{
    `result[i, h, t] = sum_d q[i, h, d] * k[t, h / g, d]` with
    `g = q_heads / kv_heads`.

    ```mlir
    %s = tq.qk %q, %k : tensor<1x8x64xf32>, tensor<?x2x64xf32> -> tensor<1x8x?xf32>
    ```
  }];
  let arguments = (ins TQ_F32Tensor3D:$query, TQ_F32Tensor3D:$keys);
  let results = (outs TQ_F32Tensor3D:$result);
  let assemblyFormat = [{
    $query `,` $keys attr-dict `:` type($query) `,` qualified(type($keys)) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def TQ_SoftmaxOp : TQ_Op<"softmax", [Pure, AttrSizedOperandSegments]> {
  let summary = "Masked, scaled, soft-capped softmax over the key dimension";
  let description = [{
    For logits `s[i, h, t]` of query `i` at position `tokens - queries + i`:
    `x = scale * s`, then `softcap * tanh(x / softcap)` if `softcap > 0`,
    then `+ slopes[h] * mask[i, t]` if a mask is given (`slopes` defaults
    to 1: ALiBi when given); keys after the query's position are dropped
    when `causal`, and keys at distance `>= window` when `window > 0`. The
    result is the softmax over `t`, where `sinks[h]`, when given, is one
    more logit whose value row is zero (it only adds to the denominator);
    a query that sees no key and no sink gets zeros. The optional `lse`
    result is the log of each row's denominator (see `tq.attention`).

    ```mlir
    %p = tq.softmax %s {scale = 0.125 : f32, causal} : tensor<4x8x?xf32> -> tensor<4x8x?xf32>
    %p2, %lse = tq.softmax %s {scale = 0.125 : f32} : tensor<1x8x?xf32> -> tensor<1x8x?xf32>, tensor<1x8xf32>
    ```
  }];
  let arguments = (ins TQ_F32Tensor3D:$logits,
                       Optional<TQ_MaskTensor>:$mask,
                       Optional<TQ_F32Tensor1D>:$slopes,
                       Optional<TQ_F32Tensor1D>:$sinks,
                       F32Attr:$scale,
                       UnitAttr:$causal,
                       DefaultValuedAttr<I64Attr, "0">:$window,
                       DefaultValuedAttr<F32Attr, "0.0f">:$softcap);
  let results = (outs TQ_F32Tensor3D:$result,
                     Optional<TQ_F32Tensor2D>:$lse);
  let assemblyFormat = [{
    $logits (`mask` `(` $mask^ `:` type($mask) `)`)?
    (`slopes` `(` $slopes^ `:` type($slopes) `)`)?
    (`sinks` `(` $sinks^ `:` type($sinks) `)`)? attr-dict `:`
    type($logits) `->` type($result) (`,` type($lse)^)?
  }];
  let hasVerifier = 1;
}

def TQ_PVOp : TQ_Op<"pv", [Pure]> {
  let summary = "Probability-weighted sum of dense values (GQA by shape)";
  let description = [{
    `result[i, h, d] = sum_t p[i, h, t] * v[t, h / g, d]`.

    ```mlir
    %o = tq.pv %p, %v : tensor<1x8x?xf32>, tensor<?x2x64xf32> -> tensor<1x8x64xf32>
    ```
  }];
  let arguments = (ins TQ_F32Tensor3D:$probs, TQ_F32Tensor3D:$values);
  let results = (outs TQ_F32Tensor3D:$result);
  let assemblyFormat = [{
    $probs `,` $values attr-dict `:` type($probs) `,` qualified(type($values)) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Fused ops over the packed cache
//===----------------------------------------------------------------------===//

def TQ_ScoreOp : TQ_Op<"score", [Pure]> {
  let summary = "Scores rotated queries against packed keys by codebook lookup";
  let description = [{
    `result[i, h, t] = <query[i, h, :], gather(keys)[t, h / g, :]>` without
    materialising the gathered keys: the query must already be rotated by
    the key format's rotation and padded to its padded dim. For formats
    with a QJL residual the score includes the residual's correction
    `||r|| sqrt(pi/2) / m <S q, sign(S r)>`. `lookup` selects how centroids
    are read: `select` keeps the codebook in registers, `lut` builds a
    per-query table `q[d] * C[c]`.

    ```mlir
    %s = tq.score %qr, %k {lookup = #tq.lookup<lut>} : tensor<1x8x128xf32>, !tq.cache<?x2x128, #tq.format<"turbo3_0">> -> tensor<1x8x?xf32>
    ```
  }];
  let arguments = (ins TQ_F32Tensor3D:$query, TQ_CacheType:$keys,
                       DefaultValuedAttr<TQ_LookupStrategyAttr,
                         "LookupStrategy::select">:$lookup);
  let results = (outs TQ_F32Tensor3D:$result);
  let assemblyFormat = [{
    $query `,` $keys attr-dict `:` type($query) `,` qualified(type($keys)) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def TQ_AccumulateOp : TQ_Op<"accumulate", [Pure]> {
  let summary = "Probability-weighted sum of packed values, in the rotated domain";
  let description = [{
    `result[i, h, :] = sum_t p[i, h, t] * gather(values)[t, h / g, :]` over
    the padded head dim, without materialising the gathered values. The
    original-domain output is the inverse rotation of the result, sliced
    to `head_dim`.

    ```mlir
    %a = tq.accumulate %p, %v : tensor<1x8x?xf32>, !tq.cache<?x2x128, #tq.format<"polar4">> -> tensor<1x8x128xf32>
    ```
  }];
  let arguments = (ins TQ_F32Tensor3D:$probs, TQ_CacheType:$values,
                       DefaultValuedAttr<TQ_LookupStrategyAttr,
                         "LookupStrategy::select">:$lookup);
  let results = (outs TQ_F32Tensor3D:$result);
  let assemblyFormat = [{
    $probs `,` $values attr-dict `:` type($probs) `,` qualified(type($values)) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// The whole computation
//===----------------------------------------------------------------------===//

def TQ_AttentionOp : TQ_Op<"attention", [Pure, AttrSizedOperandSegments]> {
  let summary = "Attention of dense queries over compressed K and V caches";
  let description = [{
    `queries x q_heads x head_dim` queries attend over `tokens` keys and
    values in their own formats and head dims (K and V may differ; the
    result rows have V's head dim). Query head `h` reads
    KV head `h / (q_heads / kv_heads)` (grouped-query attention; the group
    is fixed by the types). Query `i` sits at position
    `tokens - queries + i`. Logits are `scale * <q, k>` (`scale` defaults
    to `1/sqrt(head_dim)`), soft-capped when `softcap > 0`, plus the
    optional additive `mask` (`queries x tokens`, f32 or f16; KV tiles it
    hides entirely are skipped) times `slopes[h]` (ALiBi; 1 when absent),
    restricted to keys at or before the query's position when `causal` and
    to the last `window` positions when `window > 0`. `sinks[h]`, when
    given, is one more logit per head with a zero value row (gpt-oss-style
    attention sinks). A query that sees no key gets zeros.

    The optional second result `lse` (`queries x q_heads`) is the log of
    each row's softmax denominator, `log(sum_t exp(x_t) + exp(sinks[h]))`
    over the visible keys, and -inf where no key or sink is visible. It is
    what merges attentions over disjoint token ranges (an engine splitting
    one head's keys over its threads): with `M = max_s lse_s`,
    `out = sum_s exp(lse_s - M) out_s / sum_s exp(lse_s - M)`.

    ```mlir
    %o = tq.attention %q, %k, %v {causal} : tensor<1x32x128xf32>,
        !tq.cache<?x8x128, #tq.format<"turbo3_0">>,
        !tq.cache<?x8x128, #tq.format<"turbo2_0">> -> tensor<1x32x128xf32>
    %o2, %lse = tq.attention %q, %k, %v : tensor<1x32x128xf32>,
        !tq.cache<?x8x128, #tq.format<"turbo3_0">>,
        !tq.cache<?x8x128, #tq.format<"turbo2_0">> -> tensor<1x32x128xf32>,
        tensor<1x32xf32>
    ```
  }];
  let arguments = (ins TQ_F32Tensor3D:$query,
                       TQ_CacheType:$keys,
                       TQ_CacheType:$values,
                       Optional<TQ_MaskTensor>:$mask,
                       Optional<TQ_F32Tensor1D>:$slopes,
                       Optional<TQ_F32Tensor1D>:$sinks,
                       OptionalAttr<F32Attr>:$scale,
                       UnitAttr:$causal,
                       DefaultValuedAttr<I64Attr, "0">:$window,
                       DefaultValuedAttr<F32Attr, "0.0f">:$softcap);
  let results = (outs TQ_F32Tensor3D:$result,
                     Optional<TQ_F32Tensor2D>:$lse);
  let assemblyFormat = [{
    $query `,` $keys `,` $values (`mask` `(` $mask^ `:` type($mask) `)`)?
    (`slopes` `(` $slopes^ `:` type($slopes) `)`)?
    (`sinks` `(` $sinks^ `:` type($sinks) `)`)?
    attr-dict `:` type($query) `,` qualified(type($keys)) `,` qualified(type($values)) `->`
    type($result) (`,` type($lse)^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The logit scale: the attribute, or 1/sqrt(head_dim).
    float getScaleOrDefault();
  }];
}


//===----------------------------------------------------------------------===//
// Flash attention: KV tiles with an online softmax
//===----------------------------------------------------------------------===//

def TQ_NumTokensOp : TQ_Op<"num_tokens", [Pure]> {
  let summary = "The number of tokens in a cache";
  let description = [{
    ```mlir
    %n = tq.num_tokens %k : !tq.cache<?x8x128, #tq.format<"turbo3_0">>
    ```
  }];
  let arguments = (ins TQ_CacheType:$cache);
  let results = (outs Index:$result);
  let assemblyFormat = "$cache attr-dict `:` qualified(type($cache))";
}

def TQ_SliceTokensOp : TQ_Op<"slice_tokens", [Pure]> {
  let summary = "The rows of tokens [offset, offset + size) of a cache";
  let description = [{
    A view of a token range; no bytes move. The caller keeps the range in
    bounds (the tiling pass clamps the last tile).

    ```mlir
    %t = tq.slice_tokens %k[%t0, %size] : !tq.cache<?x8x128, #tq.format<"turbo3_0">> -> !tq.cache<?x8x128, #tq.format<"turbo3_0">>
    ```
  }];
  let arguments = (ins TQ_CacheType:$cache, Index:$offset, Index:$size);
  let results = (outs TQ_CacheType:$result);
  let assemblyFormat = [{
    $cache `[` $offset `,` $size `]` attr-dict `:` qualified(type($cache))
    `->` qualified(type($result))
  }];
  let hasVerifier = 1;
}

def TQ_OnlineSoftmaxOp : TQ_Op<"online_softmax",
    [Pure, AttrSizedOperandSegments, AllTypesMatch<["logits", "probs"]>,
     AllTypesMatch<["max", "sum", "new_max", "new_sum", "correction"]>]> {
  let summary = "One KV tile of a streaming (flash) softmax";
  let description = [{
    For the logits of keys `offset .. offset + T` of a `tokens`-long
    context, masked and scaled exactly like `tq.softmax` (query `i` at
    position `tokens - queries + i`; `mask` is this tile's columns), and
    the running row maximum `max` and sum `sum` of the tiles before it
    (attention sinks enter as the initial `max` and `sum`):

    - `new_max = max(max, rowmax(x))`,
    - `probs = exp(x - new_max)` (0 where hidden),
    - `correction = exp(max - new_max)` (what earlier partial sums and
      accumulators must be multiplied by),
    - `new_sum = sum * correction + rowsum(probs)`.

    ```mlir
    %p, %m1, %l1, %c = tq.online_softmax %s, %m, %l, %t0, %n {scale = 0.125 : f32, causal}
        : tensor<1x8x?xf32>, tensor<1x8xf32> -> tensor<1x8x?xf32>
    ```
  }];
  let arguments = (ins TQ_F32Tensor3D:$logits,
                       TQ_F32Tensor2D:$max,
                       TQ_F32Tensor2D:$sum,
                       Index:$offset,
                       Index:$tokens,
                       Optional<TQ_MaskTensor>:$mask,
                       Optional<TQ_F32Tensor1D>:$slopes,
                       F32Attr:$scale,
                       UnitAttr:$causal,
                       DefaultValuedAttr<I64Attr, "0">:$window,
                       DefaultValuedAttr<F32Attr, "0.0f">:$softcap);
  let results = (outs TQ_F32Tensor3D:$probs, TQ_F32Tensor2D:$new_max,
                      TQ_F32Tensor2D:$new_sum, TQ_F32Tensor2D:$correction);
  let assemblyFormat = [{
    $logits `,` $max `,` $sum `,` $offset `,` $tokens
    (`mask` `(` $mask^ `:` type($mask) `)`)?
    (`slopes` `(` $slopes^ `:` type($slopes) `)`)? attr-dict `:` type($logits) `,`
    type($max) `->` type($probs)
  }];
  let hasVerifier = 1;
}

def TQ_MergeTileOp : TQ_Op<"merge_tile",
    [Pure, AllTypesMatch<["acc", "tile", "result"]>]> {
  let summary = "acc * correction + tile, per (query, head) row";
  let description = [{
    Folds one tile's weighted values into the running accumulator.

    ```mlir
    %a1 = tq.merge_tile %acc, %c, %tile : tensor<1x8x128xf32>, tensor<1x8xf32>
    ```
  }];
  let arguments = (ins TQ_F32Tensor3D:$acc, TQ_F32Tensor2D:$correction,
                       TQ_F32Tensor3D:$tile);
  let results = (outs TQ_F32Tensor3D:$result);
  let assemblyFormat = [{
    $acc `,` $correction `,` $tile attr-dict `:` type($acc) `,`
    type($correction)
  }];
  let hasVerifier = 1;
}

def TQ_NormalizeOp : TQ_Op<"normalize",
    [Pure, AllTypesMatch<["acc", "result"]>]> {
  let summary = "acc / sum per (query, head) row (zero where sum is zero)";
  let description = [{
    ```mlir
    %o = tq.normalize %acc, %l : tensor<1x8x128xf32>, tensor<1x8xf32>
    ```
  }];
  let arguments = (ins TQ_F32Tensor3D:$acc, TQ_F32Tensor2D:$sum);
  let results = (outs TQ_F32Tensor3D:$result);
  let assemblyFormat = "$acc `,` $sum attr-dict `:` type($acc) `,` type($sum)";
  let hasVerifier = 1;
}

def TQ_CombineOp : TQ_Op<"combine",
    [Pure, AllTypesMatch<["max", "sum"]>]> {
  let summary = "Merge split-KV partials by log-sum-exp";
  let description = [{
    Each of S splits attended over its own token range and left a running
    maximum `max[s]`, sum `sum[s]` and unnormalised accumulator `acc[s]`.
    With `M = max_s max[s]` and `w_s = exp(max[s] - M)`:
    `result = sum_s w_s acc[s] / sum_s w_s sum[s]` (zero where nothing was
    visible).

    ```mlir
    %o = tq.combine %m, %l, %acc : tensor<4x1x8xf32>, tensor<4x1x8x128xf32> -> tensor<1x8x128xf32>
    ```
  }];
  let arguments = (ins 3DTensorOf<[F32]>:$max, 3DTensorOf<[F32]>:$sum,
                       4DTensorOf<[F32]>:$acc);
  let results = (outs TQ_F32Tensor3D:$result);
  let assemblyFormat = [{
    $max `,` $sum `,` $acc attr-dict `:` type($max) `,` type($acc) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def TQ_LaneLookupOp : TQ_Op<"lane_lookup",
    [Pure, AllShapesMatch<["index", "result"]>]> {
  let summary = "Per-lane lookup in a small constant table";
  let description = [{
    `result[i] = table[index[i] mod N]` for a 1-D vector of indices and a
    table of N entries, N a power of two from 1 to 16: how a decoded row
    picks its centroids. Only the low log2(N) bits of an index count, so
    a decoder may leave other bits set (unpacking then needs fewer masks).
    `tq-lower-lane-lookup` expands it to a binary select tree on those
    bits (any target) or to x86 register permutes of the table repeated
    to the register's width.

    ```mlir
    %c = tq.lane_lookup %idx [-1.0, -0.3, 0.3, 1.0] : vector<16xi32> -> vector<16xf32>
    ```
  }];
  let arguments = (ins VectorOfRankAndType<[1], [I32]>:$index,
                       DenseF32ArrayAttr:$table);
  let results = (outs VectorOfRankAndType<[1], [F32]>:$result);
  let assemblyFormat = "$index $table attr-dict `:` type($index) `->` type($result)";
  let hasVerifier = 1;
}

def TQ_ByteLookupOp : TQ_Op<"byte_lookup",
    [Pure, AllTypesMatch<["index", "result"]>]> {
  let summary = "Per-byte lookup in a small constant table of bytes";
  let description = [{
    `result[i] = table[index[i] mod N]` for a 1-D vector of i8 indices and
    a table of N bytes, N a power of two from 1 to 16: how a row decoded
    to bytes picks its codebook levels as integers (the int8 score path).
    Only the low log2(N) bits of an index count. Table entries are written
    as signed bytes; a consumer may read them as unsigned (tq.byte_dot
    does for its first operand).
    `tq-lower-lane-lookup` expands it to a binary select tree (any target)
    or, with `isa=avx512vnni`, to one `vpshufb` per 64 lanes of the table
    repeated to every 128-bit lane.

    ```mlir
    %c = tq.byte_lookup %idx [1, 64, -64, -1] : vector<64xi8>
    ```
  }];
  let arguments = (ins VectorOfRankAndType<[1], [I8]>:$index,
                       DenseI8ArrayAttr:$table);
  let results = (outs VectorOfRankAndType<[1], [I8]>:$result);
  let assemblyFormat = "$index $table attr-dict `:` type($index)";
  let hasVerifier = 1;
}

def TQ_ByteDotOp : TQ_Op<"byte_dot",
    [Pure, AllTypesMatch<["lhs", "rhs"]>, AllTypesMatch<["acc", "result"]>]> {
  let summary = "Groups of four unsigned x signed byte products, summed";
  let description = [{
    `result[l] = acc[l] + sum_{k<4} zext(lhs[4l+k]) * sext(rhs[4l+k])`
    in i32 (wrapping; four products of bytes cannot overflow the sum of
    one group): the integer dot product of the int8 score path, four
    products per i32 lane. `tq-lower-lane-lookup` expands it to widening
    multiplies and a reduction of each group (any target) or, with
    `isa=avx512vnni`, to one `vpdpbusd` per 16 lanes (512, 256 or 128
    bits).

    `narrow` promises that every lhs byte is below 128 (as LLVM's `nuw`
    flags promise, the producer guarantees it; a larger byte gives an
    unspecified result). Then with `isa=avx2` (or `avx512` without VNNI)
    it becomes `vpmaddubsw`, whose pair sums saturate at 16 bits but
    cannot reach them (|pair| <= 2 * 127 * 128), and `vpmaddwd` against
    ones summing each pair of pairs: exact, per 8 i32 lanes. With
    `isa=avxvnni` any byte_dot is a VEX `vpdpbusd` per 8 lanes. The verifier
    rejects `narrow` where lhs is a `tq.byte_lookup` of a table with a
    byte of 128 or more.

    ```mlir
    %s = tq.byte_dot %acc, %codes, %query : vector<64xi8> -> vector<16xi32>
    %n = tq.byte_dot %acc, %codes7, %query {narrow} : vector<64xi8> -> vector<16xi32>
    ```
  }];
  let arguments = (ins VectorOfRankAndType<[1], [I32]>:$acc,
                       VectorOfRankAndType<[1], [I8]>:$lhs,
                       VectorOfRankAndType<[1], [I8]>:$rhs,
                       UnitAttr:$narrow);
  let results = (outs VectorOfRankAndType<[1], [I32]>:$result);
  let assemblyFormat =
      "$acc `,` $lhs `,` $rhs attr-dict `:` type($lhs) `->` type($acc)";
  let hasVerifier = 1;
}

def TQ_WordLookupOp : TQ_Op<"word_lookup",
    [Pure, AllTypesMatch<["index", "result"]>]> {
  let summary = "Per-word lookup in a small constant table of 16-bit words";
  let description = [{
    `result[i] = table[index[i] mod N]` for a 1-D vector of i16 indices and
    a table of N words, N a power of two from 1 to 32: how the pair
    weighted sum turns codebook indices into 16-bit levels (int16 levels,
    or the bit patterns of bf16 centroids, bitcast by the consumer). Only
    the low log2(N) bits of an index count. `tq-lower-lane-lookup` expands
    it to a binary select tree (any target), with `isa=avx512vnni` or
    `avx512bf16` to one `vpermw` per 32 lanes of the table repeated to 32
    words, or with `isa=avx2`, `avxvnni` (or `avx512` without VNNI) to `vpshufb` per
    16 lanes on the table's bytes (one for up to 8 words, two and a blend
    for 16). On every x86 isa a lookup of bytes widened to words with
    zeros (the pair sum's indices, at most 16 words) becomes two
    `tq.byte_lookup` of the bytes (the table's low and high bytes) and
    the widening shuffle: a `vpermw` is two uops on Intel's AVX-512
    cores.

    ```mlir
    %l = tq.word_lookup %idx [-127, -40, 40, 127] : vector<32xi16>
    ```
  }];
  let arguments = (ins VectorOfRankAndType<[1], [I16]>:$index,
                       DenseI16ArrayAttr:$table);
  let results = (outs VectorOfRankAndType<[1], [I16]>:$result);
  let assemblyFormat = "$index $table attr-dict `:` type($index)";
  let hasVerifier = 1;
}

def TQ_PairDotOp : TQ_Op<"pair_dot",
    [Pure, AllTypesMatch<["lhs", "rhs"]>, AllTypesMatch<["acc", "result"]>]> {
  let summary = "Pairs of 16-bit products, summed into 32-bit lanes";
  let description = [{
    `result[l] = acc[l] + lhs[2l] * rhs[2l] + lhs[2l+1] * rhs[2l+1]`:
    with i16 operands and an i32 accumulator the products are exact and
    the sum wraps; with bf16 operands and an f32 accumulator the products
    are formed in f32. The pair weighted sum's multiply-add: lane l holds
    one value of two tokens' rows, the other operand both tokens' weights.
    `tq-lower-lane-lookup` expands it to extensions, multiplies and a sum
    of each pair (any target) or, per 16 lanes (512, 256 or 128 bits), to
    `vpdpwssd` (i16, `isa=avx512vnni` or `avx512bf16`) or
    `x86vector.avx512.dot` (`vdpbf16ps`, bf16, `isa=avx512bf16`); an i16
    `tq.pair_dot` with `isa=avx2` (or `avx512` without VNNI) becomes
    `vpmaddwd` and an add per 8 lanes (the same wrapping sums), with
    `isa=avxvnni` a VEX `vpdpwssd` per 8 lanes. The
    bf16 instruction flushes denormals and rounds its own way, so it agrees
    with the expansion to within rounding, not bit for bit.

    ```mlir
    %s = tq.pair_dot %acc, %levels, %weights : vector<32xi16> -> vector<16xi32>
    ```
  }];
  let arguments = (ins VectorOfRankAndType<[1], [I32, F32]>:$acc,
                       VectorOfRankAndType<[1], [I16, BF16]>:$lhs,
                       VectorOfRankAndType<[1], [I16, BF16]>:$rhs);
  let results = (outs VectorOfRankAndType<[1], [I32, F32]>:$result);
  let assemblyFormat =
      "$acc `,` $lhs `,` $rhs attr-dict `:` type($lhs) `->` type($acc)";
  let hasVerifier = 1;
}

def TQ_SelectBitsOp : TQ_Op<"select_bits",
    [Pure, AllTypesMatch<["source", "result"]>]> {
  let summary = "Per-byte 8-bit fields of 64-bit lanes at constant offsets";
  let description = [{
    `result[i]` is the 8 bits of 64-bit lane `i / 8` of `source` (its
    bytes little-endian) starting at bit `offsets[i]`, rotating past bit
    63 to bit 0: how a decoder gathers packed index fields of several
    values and rows into byte lanes with one instruction. Bits of the
    result above a field hold whatever follows it; a consumer masks them
    or looks up a table that ignores them. `tq-lower-lane-lookup` expands
    it to shifts of 64-bit lanes (any target) or, with `vbmi`, to one
    `vpmultishiftqb` per 64 bytes.

    ```mlir
    %f = tq.select_bits %packed [0, 2, 4, 6, 8, 10, 12, 14] : vector<8xi8>
    ```
  }];
  let arguments = (ins VectorOfRankAndType<[1], [I8]>:$source,
                       DenseI8ArrayAttr:$offsets);
  let results = (outs VectorOfRankAndType<[1], [I8]>:$result);
  let assemblyFormat = "$source $offsets attr-dict `:` type($source)";
  let hasVerifier = 1;
}

#endif // TQ_DIALECT_TQ_IR_TQOPS_TD
