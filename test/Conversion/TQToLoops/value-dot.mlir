// tq-lower-to-loops{value-dot=bf16|i16}: the one-query-row weighted sum
// two tokens per multiply-add. Per kv head the weights (probability times
// row scale) are formed once per call in vector loops over the tokens, as
// bf16 or, for i16, in fixed point with a per-head factor; each pair of
// rows is decoded to codebook indices as bytes, interleaved and widened
// to words by in-lane unpacks, looked up (tq.word_lookup) and multiplied
// with the heads' weight pairs (tq.pair_dot). Prefill rows and formats it
// does not apply to keep the f32 sum.

// RUN: tq-opt %s -split-input-file --tq-lower-to-loops="value-dot=bf16" | FileCheck %s --check-prefix=BF16
// RUN: tq-opt %s -split-input-file --tq-lower-to-loops="value-dot=i16" | FileCheck %s --check-prefix=I16
// RUN: tq-opt %s -split-input-file --tq-lower-to-loops | FileCheck %s --check-prefix=F32
// RUN: not tq-opt %s -split-input-file --tq-lower-to-loops="value-dot=f16" 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: tq-lower-to-loops: value-dot must be f32, bf16 or i16, got 'f16'

// turbo3_0 at 128: two chunks of 64 codes per row, four word vectors of
// 32 (16 pairs) each; bf16 centroids, the weights rounded to bf16.
// BF16-LABEL: func @turbo3
// BF16: arith.truncf %{{.*}} : vector<16xf32> to vector<16xbf16>
// BF16: scf.for
// BF16-COUNT-2: vector.shuffle %{{.*}} : vector<64xi8>, vector<64xi8>
// BF16: tq.word_lookup %{{.*}} : vector<32xi16>
// BF16: vector.bitcast %{{.*}} : vector<32xi16> to vector<32xbf16>
// BF16: tq.pair_dot %{{.*}} : vector<32xbf16> -> vector<16xf32>
// The weights in fixed point: the heads' largest weight and sum first.
// I16-LABEL: func @turbo3
// I16: vector.reduction <maximumf>
// I16: vector.reduction <add>
// I16: arith.fptosi %{{.*}} : vector<16xf32> to vector<16xi32>
// I16: arith.trunci %{{.*}} : vector<16xi32> to vector<16xi16>
// I16: tq.word_lookup %{{.*}} [{{.*}}] : vector<32xi16>
// I16: tq.pair_dot %{{.*}} : vector<32xi16> -> vector<16xi32>
// I16: arith.sitofp %{{.*}} : vector<16xi32> to vector<16xf32>
// F32-LABEL: func @turbo3
// F32-NOT: tq.pair_dot
// F32: vector.fma
func.func @turbo3(%p: tensor<1x2x5xf32>, %vb: tensor<5x1x50xi8>) -> tensor<1x2x128xf32> {
  %v = tq.from_bytes %vb : tensor<5x1x50xi8> -> !tq.cache<5x1x128, #tq.format<"turbo3_0">>
  %a = tq.accumulate %p, %v {lookup = #tq.lookup<tile>} : tensor<1x2x5xf32>, !tq.cache<5x1x128, #tq.format<"turbo3_0">> -> tensor<1x2x128xf32>
  return %a : tensor<1x2x128xf32>
}

// -----

// Block scales (tq3_0: no one scale per row to fold into the weights) and
// several query rows keep the f32 sum.
// BF16-LABEL: func @block_scales
// BF16-NOT: tq.pair_dot
// BF16: vector.fma
// BF16-LABEL: func @prefill_rows
// BF16-NOT: tq.pair_dot
// BF16: vector.fma
func.func @block_scales(%p: tensor<1x2x5xf32>, %vb: tensor<5x1x56xi8>) -> tensor<1x2x128xf32> {
  %v = tq.from_bytes %vb : tensor<5x1x56xi8> -> !tq.cache<5x1x128, #tq.format<"tq3_0">>
  %a = tq.accumulate %p, %v {lookup = #tq.lookup<tile>} : tensor<1x2x5xf32>, !tq.cache<5x1x128, #tq.format<"tq3_0">> -> tensor<1x2x128xf32>
  return %a : tensor<1x2x128xf32>
}
func.func @prefill_rows(%p: tensor<3x2x5xf32>, %vb: tensor<5x1x50xi8>) -> tensor<3x2x128xf32> {
  %v = tq.from_bytes %vb : tensor<5x1x50xi8> -> !tq.cache<5x1x128, #tq.format<"turbo3_0">>
  %a = tq.accumulate %p, %v {lookup = #tq.lookup<tile>} : tensor<3x2x5xf32>, !tq.cache<5x1x128, #tq.format<"turbo3_0">> -> tensor<3x2x128xf32>
  return %a : tensor<3x2x128xf32>
}
