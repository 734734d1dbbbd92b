// tq-lower-to-loops{value-dot=bf16|i16}: the fused weighted sum two
// tokens per multiply-add. Per kv head the weights (probability times
// block scale) are formed once per call in vector loops over the tokens,
// as bf16 or, for i16, in fixed point with a factor per query row, head
// and block; each pair of rows is decoded to codebook indices as bytes,
// interleaved and widened to words by in-lane unpacks, looked up
// (tq.word_lookup) and multiplied with the heads' weight pairs
// (tq.pair_dot). Formats it does not apply to keep the f32 sum.

// RUN: tq-opt %s -split-input-file --tq-lower-to-loops="value-dot=bf16" | FileCheck %s --check-prefix=BF16
// RUN: tq-opt %s -split-input-file --tq-lower-to-loops="value-dot=i16" | FileCheck %s --check-prefix=I16
// RUN: tq-opt %s -split-input-file --tq-lower-to-loops | FileCheck %s --check-prefix=F32
// RUN: tq-opt %s -split-input-file --tq-lower-to-loops="value-dot=bf16 pair-ahead=true" | FileCheck %s --check-prefix=AHEAD
// RUN: not tq-opt %s -split-input-file --tq-lower-to-loops="value-dot=f16" 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: tq-lower-to-loops: value-dot must be f32, bf16 or i16, got 'f16'

// turbo3_0 at 128: two chunks of 64 codes per row, four word vectors of
// 32 (16 pairs) each; bf16 centroids, the weights rounded to bf16.
// BF16-LABEL: func @turbo3
// BF16: arith.truncf %{{.*}} : vector<16xf32> to vector<16xbf16>
// Each pair's words decoded in the turn that takes them (no pair-ahead):
// the pair loop carries the sums alone.
// BF16: scf.for {{.*}} -> ({{(vector<16xf32>, )+}}vector<16xf32>) {
// BF16-COUNT-2: vector.shuffle %{{.*}} : vector<64xi8>, vector<64xi8>
// BF16: tq.word_lookup %{{.*}} : vector<32xi16>
// BF16: vector.bitcast %{{.*}} : vector<32xi16> to vector<32xbf16>
// BF16: tq.pair_dot %{{.*}} : vector<32xbf16> -> vector<16xf32>
// The weights in fixed point: the heads' largest weight and sum first.
// I16-LABEL: func @turbo3
// The weights' running maximum: finite, non-negative weights, so no NaN or
// signed-zero handling (a single vmaxps per step on x86).
// I16: arith.maximumf %{{.*}}, %{{.*}} fastmath<nnan,nsz> : vector<16xf32>
// I16: vector.reduction <maximumf>
// I16: vector.reduction <add>
// Each weight round(p q s) as the low bits of p q s + 1.5 * 2^23 (one
// fused multiply-add, no rounding or conversion instruction).
// I16: %[[PQ:.*]] = arith.mulf %{{.*}}, %{{.*}} : vector<16xf32>
// I16: %[[PQS:.*]] = arith.mulf %[[PQ]], %{{.*}} fastmath<contract> : vector<16xf32>
// I16: %[[W:.*]] = arith.addf %[[PQS]], %{{.*}} fastmath<contract> : vector<16xf32>
// I16: %[[BITS:.*]] = vector.bitcast %[[W]] : vector<16xf32> to vector<16xi32>
// I16: arith.trunci %[[BITS]] : vector<16xi32> to vector<16xi16>
// I16: tq.word_lookup %{{.*}} [{{.*}}] : vector<32xi16>
// I16: tq.pair_dot %{{.*}} : vector<32xi16> -> vector<16xi32>
// I16: arith.sitofp %{{.*}} : vector<16xi32> to vector<16xf32>
// F32-LABEL: func @turbo3
// F32-NOT: tq.pair_dot
// F32: vector.fma
// With pair-ahead (one query row) pair 0's words are decoded before the
// loop (none without tokens), every turn decodes pair min(n + 1, last)
// and yields its words after the sums, and the dots take the words
// carried in (iter_args, not this turn's lookups).
// AHEAD-LABEL: func @turbo3
// AHEAD: %[[FIRST:.*]]:8 = scf.if %{{.*}} -> (vector<32xi16>, vector<32xi16>, vector<32xi16>, vector<32xi16>, vector<32xi16>, vector<32xi16>, vector<32xi16>, vector<32xi16>) {
// AHEAD: tq.word_lookup
// AHEAD: } else {
// AHEAD: scf.yield %[[NONE:.*]], %[[NONE]], %[[NONE]], %[[NONE]], %[[NONE]], %[[NONE]], %[[NONE]], %[[NONE]] :
// AHEAD: scf.for {{.*}} iter_args({{.*}}, %[[W0:.*]] = %[[FIRST]]#0, {{.*}} = %[[FIRST]]#7) -> ({{.*}}vector<16xf32>, vector<32xi16>, vector<32xi16>, vector<32xi16>, vector<32xi16>, vector<32xi16>, vector<32xi16>, vector<32xi16>, vector<32xi16>) {
// AHEAD: arith.minui
// AHEAD: %[[NEXT:.*]] = tq.word_lookup
// AHEAD: %[[B0:.*]] = vector.bitcast %[[W0]] : vector<32xi16> to vector<32xbf16>
// AHEAD: tq.pair_dot %{{.*}}, %[[B0]], %{{.*}} : vector<32xbf16> -> vector<16xf32>
// AHEAD: scf.yield {{.*}}, %[[NEXT]], {{.*}} : {{.*}}vector<16xf32>, vector<32xi16>,
func.func @turbo3(%p: tensor<1x2x5xf32>, %vb: tensor<5x1x50xi8>) -> tensor<1x2x128xf32> {
  %v = tq.from_bytes %vb : tensor<5x1x50xi8> -> !tq.cache<5x1x128, #tq.format<"turbo3_0">>
  %a = tq.accumulate %p, %v {lookup = #tq.lookup<tile>} : tensor<1x2x5xf32>, !tq.cache<5x1x128, #tq.format<"turbo3_0">> -> tensor<1x2x128xf32>
  return %a : tensor<1x2x128xf32>
}

// -----

// Rows of several scale blocks (turbo3_0 at 256: a norm per 128 values):
// weights per head and block with one fixed-point factor per head, from
// each token's probability times its larger block scale (the maximum of
// the two blocks' scales, then the running maximum); each token step
// writes both blocks' words. The four heads share one token loop, each
// carrying its own maximum and sum (eight independent chains). The passes
// over the first block's chunks take its weights, those over the second's
// theirs.
// BF16-LABEL: func @two_blocks
// I16-LABEL: func @two_blocks
// I16: tensor.empty() : tensor<1x4x2xf32>
// I16: scf.for {{.*}} -> (tensor<1x4x2x?xi16>, tensor<1x4x2xf32>)
// I16: scf.for {{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// I16: %[[LARGEST:.*]] = arith.maximumf %{{.*}}, %{{.*}} fastmath<nnan,nsz> : vector<16xf32>
// I16: %[[W0:.*]] = arith.mulf %{{.*}}, %[[LARGEST]] : vector<16xf32>
// I16: arith.maximumf %{{.*}}, %[[W0]] fastmath<nnan,nsz> : vector<16xf32>
// I16: arith.addf %{{.*}}, %[[W0]] : vector<16xf32>
// I16: %[[W3:.*]] = arith.mulf %{{.*}}, %[[LARGEST]] : vector<16xf32>
// I16: arith.maximumf %{{.*}}, %[[W3]] fastmath<nnan,nsz> : vector<16xf32>
// I16: scf.yield
// I16: tensor.insert %[[F:.*]] into %{{.*}}[%{{.*}}, %{{.*}}, %c0{{.*}}] : tensor<1x4x2xf32>
// I16: tensor.insert %[[F]] into %{{.*}}[%{{.*}}, %{{.*}}, %c1{{.*}}] : tensor<1x4x2xf32>
// I16: vector.transfer_write %{{.*}}[%{{.*}}, %{{.*}}, %c0{{.*}}, %{{.*}}]{{.*}} : vector<16xi16>, tensor<1x4x2x?xi16>
// I16: vector.transfer_write %{{.*}}[%{{.*}}, %{{.*}}, %c1{{.*}}, %{{.*}}]{{.*}} : vector<16xi16>, tensor<1x4x2x?xi16>
// I16: vector.transfer_read %{{.*}}[%c0{{.*}}, %{{.*}}, %c0{{.*}}, %{{.*}}]{{.*}} : tensor<1x4x2x?xi16>, vector<2xi16>
// I16: tq.pair_dot
// I16: tensor.extract %{{.*}}[%c0{{.*}}, %{{.*}}, %c0{{.*}}] : tensor<1x4x2xf32>
// I16: vector.transfer_read %{{.*}}[%c0{{.*}}, %{{.*}}, %c1{{.*}}, %{{.*}}]{{.*}} : tensor<1x4x2x?xi16>, vector<2xi16>
// I16: tq.pair_dot
// I16: tensor.extract %{{.*}}[%c0{{.*}}, %{{.*}}, %c1{{.*}}] : tensor<1x4x2xf32>
func.func @two_blocks(%p: tensor<1x4x5xf32>, %vb: tensor<5x1x100xi8>) -> tensor<1x4x256xf32> {
  %v = tq.from_bytes %vb : tensor<5x1x100xi8> -> !tq.cache<5x1x256, #tq.format<"turbo3_0">>
  %a = tq.accumulate %p, %v {lookup = #tq.lookup<tile>} : tensor<1x4x5xf32>, !tq.cache<5x1x256, #tq.format<"turbo3_0">> -> tensor<1x4x256xf32>
  return %a : tensor<1x4x256xf32>
}

// -----

// tq3_0's 32-value blocks: 64-lane chunks span two blocks, each 128-bit
// lane (16 lanes of the chunk) inside one, so a chunk's pair weights take
// each 128-bit lane from its block's broadcast weights, and so do the
// factors that scale the sums. The rows' four fp16 block scales (bytes
// 12, 26, 40, 54) go to a row-major table with one write per row, and
// each block's are shuffled out of 16 rows' entries to be widened.
// I16-LABEL: func @chunks_over_two_blocks
// I16: %[[ROWS:.*]] = scf.for {{.*}} -> (tensor<?xi16>)
// I16: vector.transfer_read %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}, %c12]{{.*}} vector<2xi8>
// I16: vector.transfer_read %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}, %c54]{{.*}} vector<2xi8>
// I16: %[[ROW:.*]] = vector.from_elements %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : vector<4xi16>
// I16: vector.transfer_write %[[ROW]], %{{.*}} {in_bounds = [true]} : vector<4xi16>, tensor<?xi16>
// I16: %[[SIXTEEN:.*]] = vector.transfer_read %[[ROWS]][%{{.*}}], %{{.*}} : tensor<?xi16>, vector<64xi16>
// I16: vector.shuffle %[[SIXTEEN]], %[[SIXTEEN]] [0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60] : vector<64xi16>, vector<64xi16>
// I16: vector.shuffle %[[SIXTEEN]], %[[SIXTEEN]] [3, 7, 11, 15, 19, 23, 27, 31, 35, 39, 43, 47, 51, 55, 59, 63] : vector<64xi16>, vector<64xi16>
// I16: vector.broadcast %{{.*}} : vector<1xi32> to vector<16xi32>
// I16: vector.broadcast %{{.*}} : vector<1xi32> to vector<16xi32>
// I16: %[[W:.*]] = vector.shuffle %{{.*}}, %{{.*}} [0, 1, 2, 3, 4, 5, 6, 7, 24, 25, 26, 27, 28, 29, 30, 31] : vector<16xi32>, vector<16xi32>
// I16: %[[WORDS:.*]] = vector.bitcast %[[W]] : vector<16xi32> to vector<32xi16>
// I16: tq.pair_dot %{{.*}}, %{{.*}}, %[[WORDS]]
// I16: tensor.extract %{{.*}} : tensor<1x4x4xf32>
// I16: tensor.extract %{{.*}} : tensor<1x4x4xf32>
// I16: %[[F:.*]] = vector.shuffle %{{.*}}, %{{.*}} [0, 1, 2, 3, 4, 5, 6, 7, 24, 25, 26, 27, 28, 29, 30, 31] : vector<16xi32>, vector<16xi32>
// I16: %[[FS:.*]] = vector.bitcast %[[F]] : vector<16xi32> to vector<16xf32>
// I16: arith.mulf %{{.*}}, %[[FS]] : vector<16xf32>
func.func @chunks_over_two_blocks(%p: tensor<1x4x5xf32>, %vb: tensor<5x1x56xi8>) -> tensor<1x4x128xf32> {
  %v = tq.from_bytes %vb : tensor<5x1x56xi8> -> !tq.cache<5x1x128, #tq.format<"tq3_0">>
  %a = tq.accumulate %p, %v {lookup = #tq.lookup<tile>} : tensor<1x4x5xf32>, !tq.cache<5x1x128, #tq.format<"tq3_0">> -> tensor<1x4x128xf32>
  return %a : tensor<1x4x128xf32>
}

// -----

// tq3_0 at head dim 96: 96 values are no whole number of 64-lane chunks,
// and its 32-value blocks in 32-lane chunks ran far slower than the f32
// sum, which it keeps.
// I16-LABEL: func @short_blocks_narrow_chunks
// I16-NOT: tq.pair_dot
// I16: vector.fma
func.func @short_blocks_narrow_chunks(%p: tensor<1x4x5xf32>, %vb: tensor<5x1x42xi8>) -> tensor<1x4x96xf32> {
  %v = tq.from_bytes %vb : tensor<5x1x42xi8> -> !tq.cache<5x1x96, #tq.format<"tq3_0">>
  %a = tq.accumulate %p, %v {lookup = #tq.lookup<tile>} : tensor<1x4x5xf32>, !tq.cache<5x1x96, #tq.format<"tq3_0">> -> tensor<1x4x96xf32>
  return %a : tensor<1x4x96xf32>
}

// -----

// QJL residual signs (tqprod) keep the f32 sum.
// BF16-LABEL: func @qjl_residual
// BF16-NOT: tq.pair_dot
// BF16: vector.fma
// Several query rows: weights per query row; every pair's words formed
// once into a buffer (prefetching the next tile's rows as it goes), then a
// loop over the query rows whose passes read them from there.
// BF16-LABEL: func @prefill_rows
// BF16: scf.for {{.*}} -> (tensor<3x2x1x?xbf16>)
// BF16: %[[EMPTY:.*]] = tensor.empty(%{{.*}}) : tensor<?x8x32xi16>
// BF16: %[[WORDS:.*]] = scf.for {{.*}} iter_args(%{{.*}} = %[[EMPTY]]) -> (tensor<?x8x32xi16>)
// BF16-COUNT-4: memref.prefetch
// BF16-COUNT-8: tq.word_lookup
// BF16: scf.for %[[I:.*]] = {{.*}} -> (tensor<3x2x128xf32>)
// BF16: scf.for
// BF16: vector.transfer_read %[[WORDS]]{{.*}} : tensor<?x8x32xi16>, vector<32xi16>
// BF16: tq.pair_dot
// BF16-NOT: vector.fma
func.func @qjl_residual(%p: tensor<1x2x5xf32>, %vb: tensor<5x1x100xi8>) -> tensor<1x2x256xf32> {
  %v = tq.from_bytes %vb : tensor<5x1x100xi8> -> !tq.cache<5x1x256, #tq.format<"tqprod3">>
  %a = tq.accumulate %p, %v {lookup = #tq.lookup<tile>} : tensor<1x2x5xf32>, !tq.cache<5x1x256, #tq.format<"tqprod3">> -> tensor<1x2x256xf32>
  return %a : tensor<1x2x256xf32>
}
func.func @prefill_rows(%p: tensor<3x2x5xf32>, %vb: tensor<5x1x50xi8>) -> tensor<3x2x128xf32> {
  %v = tq.from_bytes %vb : tensor<5x1x50xi8> -> !tq.cache<5x1x128, #tq.format<"turbo3_0">>
  %a = tq.accumulate %p, %v {lookup = #tq.lookup<tile>} : tensor<3x2x5xf32>, !tq.cache<5x1x128, #tq.format<"turbo3_0">> -> tensor<3x2x128xf32>
  return %a : tensor<3x2x128xf32>
}

// -----

// The weights' row scales (turbo3_0: one fp16 norm per row) are moved as
// fp16 bits and widened 16 at a time, as block scales are. Paged caches
// take the rows' bits without per-row page and slot reads where all the
// rows are in one page (row 0's page, each row a slot further); empty
// ranges read no address, and rows over several pages read their own.
// I16-LABEL: func @paged_row_scales
// I16: %[[SOME:.*]] = arith.cmpi ne, %[[N:.*]], %{{.*}} : index
// I16: scf.if %[[SOME]] -> (tensor<?xi16>)
// I16: %[[PAGE32:.*]] = tensor.extract %{{.*}}#0[%{{.*}}] : tensor<?xi32>
// I16: %[[PAGE:.*]] = arith.index_castui %[[PAGE32]] : i32 to index
// I16: %[[SLOT32:.*]] = tensor.extract %{{.*}}#1[%{{.*}}] : tensor<?xi32>
// I16: %[[SLOT:.*]] = arith.index_castui %[[SLOT32]] : i32 to index
// I16: scf.if %{{.*}} -> (tensor<?xi16>)
// I16: scf.for %[[T:.*]] = %{{.*}} to %[[N]]
// I16-NOT: tensor.extract
// I16: %[[AT:.*]] = arith.addi %[[SLOT]], %[[T]] : index
// I16: vector.transfer_read %{{.*}}[%[[PAGE]], %[[AT]], {{.*}} vector<2xi8>
// I16: vector.bitcast %{{.*}} : vector<2xi8> to vector<1xi16>
// I16: } else {
// I16: scf.for
// I16: tensor.extract %{{.*}}#0[
// I16: tensor.extract %{{.*}}#1[
// I16: vector.transfer_read {{.*}} vector<2xi8>
// I16: } else {
// I16: vector.bitcast %{{.*}} : vector<16xi16> to vector<16xf16>
// I16: arith.extf %{{.*}} : vector<16xf16> to vector<16xf32>
// I16: tq.pair_dot
func.func @paged_row_scales(%p: tensor<1x4x?xf32>, %pool: tensor<?x16x1x50xi8>, %table: tensor<?xi32>, %n: index) -> tensor<1x4x128xf32> {
  %v = tq.from_pages %pool[%table], %n : tensor<?x16x1x50xi8>, tensor<?xi32> -> !tq.cache<?x1x128, #tq.format<"turbo3_0">>
  %a = tq.accumulate %p, %v {lookup = #tq.lookup<tile>} : tensor<1x4x?xf32>, !tq.cache<?x1x128, #tq.format<"turbo3_0">> -> tensor<1x4x128xf32>
  return %a : tensor<1x4x128xf32>
}
