// RUN: tq-opt %s -split-input-file --tq-lower-to-loops -verify-diagnostics | FileCheck %s

// Scoring turbo3_0 keys: each row's fp16 norm is decoded once (two bytes
// -> i16 -> f16 -> f32) into a scale tensor; each element assembles its
// 3-bit index from the 2-bit plane at byte 2 and the 1-bit plane at byte
// 34, reads its centroid from a constant table and multiplies by the
// row's scale. GQA: kv head = query head / 2.
// CHECK-LABEL: func @score_turbo3
// CHECK-SAME: (%[[Q:.*]]: tensor<1x2x128xf32>, %[[KB:.*]]: tensor<5x1x50xi8>)
// The contiguous bytes become a pool of one page.
// CHECK: %[[POOL:.*]] = tensor.expand_shape %[[KB]] {{\[}}[0, 1], [2], [3]] output_shape [1, 5, 1, 50] : tensor<5x1x50xi8> into tensor<1x5x1x50xi8>
// CHECK: %[[CAST:.*]] = tensor.cast %[[POOL]] : tensor<1x5x1x50xi8> to tensor<?x?x1x50xi8>
// CHECK: %[[CB:.*]] = arith.constant dense<[-1.906850e-01, {{.*}}, 1.906850e-01]> : tensor<8xf32>
// CHECK: %[[SCALES:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<5x1x1xf32>)
// CHECK: tensor.extract %[[CAST]][%c0{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] : tensor<?x?x1x50xi8>
// CHECK: arith.bitcast %{{.*}} : i16 to f16
// CHECK: arith.extf %{{.*}} : f16 to f32
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "reduction"]{{.*}} ins(%[[Q]] : tensor<1x2x128xf32>)
// CHECK: %[[H:.*]] = linalg.index 1
// CHECK: %[[KVH:.*]] = arith.divui %[[H]], %c2
// CHECK: tensor.extract %[[SCALES]][%{{.*}}, %[[KVH]], %{{.*}}] : tensor<5x1x1xf32>
// CHECK: tensor.extract %[[CAST]][%c0{{.*}}, %{{.*}}, %[[KVH]], %{{.*}}] : tensor<?x?x1x50xi8>
// CHECK: arith.shrui
// CHECK: arith.andi %{{.*}}, %c3_i32
// CHECK: %c34 = arith.constant 34 : index
// CHECK: arith.andi %{{.*}}, %c1_i32
// CHECK: arith.shli %{{.*}}, %c2_i32
// CHECK: %[[IDX:.*]] = arith.index_castui %{{.*}} : i32 to index
// CHECK: tensor.extract %[[CB]][%[[IDX]]] : tensor<8xf32>
// CHECK-NOT: tq.
func.func @score_turbo3(%q: tensor<1x2x128xf32>, %kb: tensor<5x1x50xi8>) -> tensor<1x2x5xf32> {
  %k = tq.from_bytes %kb : tensor<5x1x50xi8> -> !tq.cache<5x1x128, #tq.format<"turbo3_0">>
  %s = tq.score %q, %k : tensor<1x2x128xf32>, !tq.cache<5x1x128, #tq.format<"turbo3_0">> -> tensor<1x2x5xf32>
  return %s : tensor<1x2x5xf32>
}

// -----

// lookup = lut first builds lut[i, h, d, c] = q[i, h, d] * C[c], then reads
// it with the decoded index.
// CHECK-LABEL: func @score_lut
// CHECK: %[[LUT:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "parallel"]
// CHECK: arith.mulf
// CHECK: -> tensor<1x2x64x4xf32>
// CHECK: linalg.generic
// CHECK: tensor.extract %[[LUT]][%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] : tensor<1x2x64x4xf32>
func.func @score_lut(%q: tensor<1x2x64xf32>, %kb: tensor<?x2x18xi8>) -> tensor<1x2x?xf32> {
  %k = tq.from_bytes %kb : tensor<?x2x18xi8> -> !tq.cache<?x2x64, #tq.format<"polar2">>
  %s = tq.score %q, %k {lookup = #tq.lookup<lut>} : tensor<1x2x64xf32>, !tq.cache<?x2x64, #tq.format<"polar2">> -> tensor<1x2x?xf32>
  return %s : tensor<1x2x?xf32>
}

// -----

// lookup = tile with a vector row decoder: rows are read straight from the
// cache (the prefetches of the previous tile brought them in), decoded in
// 16-lane chunks held in registers, four tokens per step (the last three
// clamped to the last token: a repeat writes the same score), and both
// query heads take a chain of vector multiply-adds per token.
// Lanes keep the row's order: a chunk's 16 two-bit fields are one 32-bit
// word of the row (bytes 2.. for the first chunk), broadcast and shifted
// by 0, 2, .., 30; its 16 high bits sit in the word at byte 33, shifted
// so each lands on bit 2 of the index (bits above stay: tq.lane_lookup
// ignores them). While the step is scored, the same rows of the next
// range (past the end here: the guard skips them) are prefetched, both
// ends of their 50 bytes.
// CHECK-LABEL: func @score_tile
// CHECK-NOT: vector.shuffle
// CHECK: %[[CACHE:.*]] = tensor.cast %{{.*}} : tensor<1x5x1x50xi8> to tensor<?x?x1x50xi8>
// CHECK-NOT: vector<50xi8>
// CHECK: %[[POOL:.*]] = bufferization.to_buffer %[[CACHE]] read_only
// CHECK: scf.for %[[T:.*]] = %c0{{.*}} to %c5{{.*}} step %c4{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (tensor<1x2x5xf32>)
// CHECK: scf.if
// CHECK: memref.prefetch %[[POOL]][{{.*}}, %c0{{.*}}], read, locality<3>, data
// CHECK: memref.prefetch %[[POOL]][{{.*}}, %c49{{.*}}], read, locality<3>, data
// A contiguous cache: row t is slot 0 + t of its single page.
// CHECK: %[[ROW:.*]] = arith.addi %c0{{.*}}, %[[T]] : index
// CHECK: %[[T1:.*]] = arith.minui
// CHECK: %[[ROW1:.*]] = arith.addi %c0{{.*}}, %[[T1]] : index
// CHECK: %[[Q0:.*]] = vector.transfer_read %arg0{{.*}} : tensor<1x2x128xf32>, vector<16xf32>
// CHECK: %[[Q1:.*]] = vector.transfer_read %arg0{{.*}} : tensor<1x2x128xf32>, vector<16xf32>
// CHECK: %[[LOBYTES:.*]] = vector.transfer_read %[[CACHE]][%{{.*}}, %[[ROW]], %{{.*}}, %c2{{.*}}]{{.*}} : tensor<?x?x1x50xi8>, vector<4xi8>
// CHECK: %[[LOWORD:.*]] = vector.bitcast %[[LOBYTES]] : vector<4xi8> to vector<1xi32>
// CHECK: %[[LOW:.*]] = vector.extract %[[LOWORD]][0]
// CHECK: %[[LOS:.*]] = vector.broadcast %[[LOW]] : i32 to vector<16xi32>
// CHECK: %[[LOSHIFT:.*]] = arith.constant dense<[0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30]> : vector<16xi32>
// CHECK: %[[LOF:.*]] = arith.shrui %[[LOS]], %[[LOSHIFT]] : vector<16xi32>
// CHECK: vector.transfer_read %[[CACHE]][%{{.*}}, %[[ROW]], %{{.*}}, %c33{{.*}}]{{.*}} : tensor<?x?x1x50xi8>, vector<4xi8>
// CHECK: %[[HISHIFT:.*]] = arith.constant dense<[6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21]> : vector<16xi32>
// CHECK: %[[HIF:.*]] = arith.shrui %{{.*}}, %[[HISHIFT]] : vector<16xi32>
// Neither field is masked: the high plane is the index's top (tq.lane_lookup
// reads the low 3 bits) and one bit-select takes bits 0-1 from the low
// plane, the rest from the high one: hi ^ ((hi ^ lo) & 3).
// CHECK: %[[LOWBITS:.*]] = arith.constant dense<3> : vector<16xi32>
// CHECK: %[[MIX:.*]] = arith.xori %[[HIF]], %[[LOF]] : vector<16xi32>
// CHECK: %[[SEL:.*]] = arith.andi %[[MIX]], %[[LOWBITS]] : vector<16xi32>
// CHECK: %[[IDX:.*]] = arith.xori %[[HIF]], %[[SEL]] : vector<16xi32>
// The 3-bit centroid: one tq.lane_lookup over the 8 levels per chunk
// (tq-lower-lane-lookup expands it for the target). The row's single
// scale is not applied per value: it scales each score.
// CHECK: %[[K0:.*]] = tq.lane_lookup %[[IDX]] [-{{.*}}] : vector<16xi32> -> vector<16xf32>
// CHECK-NEXT: arith.mulf %[[Q0]], %[[K0]] : vector<16xf32>
// CHECK-NEXT: arith.mulf %[[Q1]], %[[K0]] : vector<16xf32>
// The second token of the step reads its own row.
// CHECK: vector.transfer_read %[[CACHE]][%{{.*}}, %[[ROW1]], %{{.*}}, %c2{{.*}}]
// The second chunk: the next word of each plane.
// CHECK: vector.transfer_read %[[CACHE]][%{{.*}}, %[[ROW]], %{{.*}}, %c6{{.*}}]
// CHECK: vector.transfer_read %[[CACHE]][%{{.*}}, %[[ROW]], %{{.*}}, %c35{{.*}}]
// CHECK: vector.fma
// CHECK-NOT: tensor<5x1x128xf32>
// Eight chains (lane hh * 4 + r: 2 heads x 4 tokens) share one shuffle
// tree; the rows' fp16 scales (byte 0) scale each head's 4 consecutive
// scores, written as one vector (masked past the last token).
// CHECK: %[[EIGHT:.*]] = arith.addf %{{.*}}, %{{.*}} : vector<8xf32>
// CHECK: %[[SB:.*]] = vector.transfer_read %[[CACHE]][%{{.*}}, %[[ROW]], %{{.*}}, %c0{{.*}}]{{.*}} : tensor<?x?x1x50xi8>, vector<2xi8>
// CHECK: %[[SH:.*]] = vector.bitcast %[[SB]] : vector<2xi8> to vector<1xf16>
// CHECK: vector.transfer_read %[[CACHE]][%{{.*}}, %[[ROW1]], %{{.*}}, %c0{{.*}}]{{.*}} vector<2xi8>
// CHECK: %[[SCALES:.*]] = vector.from_elements %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : vector<4xf32>
// CHECK: %[[PERLANE:.*]] = vector.shuffle %[[SCALES]], %[[SCALES]] [0, 1, 2, 3, 0, 1, 2, 3]
// CHECK: %[[SCALED:.*]] = arith.mulf %[[EIGHT]], %[[PERLANE]] : vector<8xf32>
// CHECK: %[[H0:.*]] = vector.extract_strided_slice %[[SCALED]] {offsets = [0], sizes = [4], strides = [1]}
// CHECK: %[[W0:.*]] = vector.transfer_write %[[H0]], %{{.*}}[%{{.*}}, %{{.*}}, %[[T]]] : vector<4xf32>, tensor<1x2x5xf32>
// CHECK: %[[H1:.*]] = vector.extract_strided_slice %[[SCALED]] {offsets = [4], sizes = [4], strides = [1]}
// CHECK: vector.transfer_write %[[H1]], %[[W0]][%{{.*}}, %{{.*}}, %[[T]]] : vector<4xf32>, tensor<1x2x5xf32>
// CHECK: scf.yield
func.func @score_tile(%q: tensor<1x2x128xf32>, %kb: tensor<5x1x50xi8>) -> tensor<1x2x5xf32> {
  %k = tq.from_bytes %kb : tensor<5x1x50xi8> -> !tq.cache<5x1x128, #tq.format<"turbo3_0">>
  %s = tq.score %q, %k {lookup = #tq.lookup<tile>} : tensor<1x2x128xf32>, !tq.cache<5x1x128, #tq.format<"turbo3_0">> -> tensor<1x2x5xf32>
  return %s : tensor<1x2x5xf32>
}

// -----

// Several query rows (prefill): the step's four rows are decoded once, all
// 8 chunks each, before the loop over the query rows, which only runs the
// multiply-add chains.
// CHECK-LABEL: func @score_tile_rows
// CHECK: scf.for %{{.*}} step %c4{{.*}} -> (tensor<?x2x5xf32>)
// CHECK-COUNT-32: tq.lane_lookup
// CHECK: scf.for %[[I:.*]] = %c0{{.*}} to %{{.*}} iter_args(%{{.*}}) -> (tensor<?x2x5xf32>)
// CHECK-NOT: tq.lane_lookup
// CHECK: vector.fma
// CHECK-NOT: tq.lane_lookup
// CHECK: vector.transfer_write %{{.*}}[%[[I]], %{{.*}}, %{{.*}}] : vector<4xf32>, tensor<?x2x5xf32>
// CHECK: return
func.func @score_tile_rows(%q: tensor<?x2x128xf32>, %kb: tensor<5x1x50xi8>) -> tensor<?x2x5xf32> {
  %k = tq.from_bytes %kb : tensor<5x1x50xi8> -> !tq.cache<5x1x128, #tq.format<"turbo3_0">>
  %s = tq.score %q, %k {lookup = #tq.lookup<tile>} : tensor<?x2x128xf32>, !tq.cache<5x1x128, #tq.format<"turbo3_0">> -> tensor<?x2x5xf32>
  return %s : tensor<?x2x5xf32>
}

// -----

// One query row: the rows' scales are gathered (a loop over the tokens
// moving their fp16 bits, then one widening them 16 at a time) and each
// head's weights multiplied by them (a loop over the group's
// heads around one over contiguous tokens: it vectorises), then the
// weighted sum keeps its output in loop-carried vectors (2 heads x 8
// chunks = 16 accumulators, one pass over the tokens) and writes each
// chunk of both heads once after the token loop, as one 2-D write; lanes
// are in row order (each chunk's fields are word reads of the row).
// CHECK-LABEL: func @accumulate_tile_one_row
// CHECK: %[[CACHE:.*]] = tensor.cast %{{.*}} : tensor<1x5x1x50xi8> to tensor<?x?x1x50xi8>
// CHECK: %[[BITS:.*]] = scf.for %[[U:.*]] = %c0{{.*}} to %c5{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (tensor<5xi16>)
// CHECK: %[[UROW:.*]] = arith.addi %c0{{.*}}, %[[U]] : index
// CHECK: vector.transfer_read %[[CACHE]][%{{.*}}, %[[UROW]], %{{.*}}, %c0{{.*}}]{{.*}} vector<2xi8>
// CHECK: %[[SCALES:.*]] = scf.for {{.*}} -> (tensor<1x5xf32>)
// CHECK: vector.transfer_read %[[BITS]]{{.*}} vector<16xi16>
// CHECK: arith.extf %{{.*}} : vector<16xf16> to vector<16xf32>
// CHECK: %[[W:.*]] = scf.for %[[HH:.*]] = %c0{{.*}} to %c2{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (tensor<2x5xf32>)
// CHECK: %[[H:.*]] = arith.addi %{{.*}}, %[[HH]] : index
// CHECK: scf.for %[[S:.*]] = %c0{{.*}} to %c5{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (tensor<2x5xf32>)
// CHECK: %[[P0:.*]] = tensor.extract %arg0[%c0{{.*}}, %[[H]], %[[S]]] : tensor<1x2x5xf32>
// CHECK: %[[SC:.*]] = tensor.extract %[[SCALES]][%c0{{.*}}, %[[S]]] : tensor<1x5xf32>
// CHECK: %[[PS:.*]] = arith.mulf %[[P0]], %[[SC]] : f32
// CHECK: tensor.insert %[[PS]] into %{{.*}}[%[[HH]], %[[S]]] : tensor<2x5xf32>
// CHECK: %[[ACCS:.*]]:16 = scf.for %[[T:.*]] = %c0{{.*}} to %c5{{.*}} iter_args({{.*}}) -> (vector<16xf32>, {{.*}}vector<16xf32>) {
// CHECK: %[[TROW:.*]] = arith.addi %c0{{.*}}, %[[T]] : index
// CHECK: vector.transfer_read %[[CACHE]][%{{.*}}, %[[TROW]], %{{.*}}, %c2{{.*}}]{{.*}} vector<4xi8>
// CHECK: tq.lane_lookup
// CHECK: %[[W0:.*]] = tensor.extract %[[W]][%{{.*}}, %[[T]]] : tensor<2x5xf32>
// CHECK: %[[B0:.*]] = vector.broadcast %[[W0]] : f32 to vector<16xf32>
// CHECK-COUNT-8: vector.fma %[[B0]],
// CHECK: tensor.extract %[[W]][%{{.*}}, %[[T]]] : tensor<2x5xf32>
// CHECK-COUNT-8: vector.fma
// CHECK: scf.yield
// CHECK-COUNT-8: vector.transfer_write {{.*}} : vector<2x16xf32>, tensor<1x2x128xf32>
// CHECK-NOT: vector.transfer_write
// CHECK-NOT: vector.shuffle
// CHECK: return
func.func @accumulate_tile_one_row(%p: tensor<1x2x5xf32>, %vb: tensor<5x1x50xi8>) -> tensor<1x2x128xf32> {
  %v = tq.from_bytes %vb : tensor<5x1x50xi8> -> !tq.cache<5x1x128, #tq.format<"turbo3_0">>
  %a = tq.accumulate %p, %v {lookup = #tq.lookup<tile>} : tensor<1x2x5xf32>, !tq.cache<5x1x128, #tq.format<"turbo3_0">> -> tensor<1x2x128xf32>
  return %a : tensor<1x2x128xf32>
}

// -----

// Any number of query rows (prefill): tokens come in pairs (the second
// clamped to the last token and weighted 0 past it); each pair's V rows
// are decoded once and update every query row's output chunks in place,
// one load and one store per chunk for both tokens. The group's heads are
// a loop, not unrolled: the IR does not grow with the group.
// CHECK-LABEL: func @accumulate_tile_rows
// CHECK: scf.for %[[T:.*]] = %c0{{.*}} to %c5{{.*}} step %c2{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (tensor<?x2x128xf32>)
// CHECK: %[[T1:.*]] = arith.minui
// CHECK: tq.lane_lookup
// CHECK: scf.for %[[I:.*]] = %c0{{.*}} to %{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (tensor<?x2x128xf32>)
// CHECK: scf.for %[[HH:.*]] = %c0{{.*}} to %c2{{.*}} iter_args(%[[OUT:.*]] = %{{.*}}) -> (tensor<?x2x128xf32>)
// CHECK: arith.addi %{{.*}}, %[[HH]] : index
// CHECK: tensor.extract %arg0[%[[I]], %{{.*}}, %[[T]]]
// CHECK: %[[P1:.*]] = tensor.extract %arg0[%[[I]], %{{.*}}, %[[T1]]]
// CHECK: arith.select %{{.*}}, %[[P1]], %{{.*}} : f32
// CHECK: %[[A:.*]] = vector.transfer_read %[[OUT]][%[[I]], %[[H:[0-9a-z_]+]], %{{.*}}]
// CHECK: %[[F0:.*]] = vector.fma %{{.*}}, %{{.*}}, %[[A]] : vector<16xf32>
// CHECK: %[[F:.*]] = vector.fma %{{.*}}, %{{.*}}, %[[F0]] : vector<16xf32>
// CHECK: vector.transfer_write %[[F]], %[[OUT]][%[[I]], %[[H]], %{{.*}}]
func.func @accumulate_tile_rows(%p: tensor<?x2x5xf32>, %vb: tensor<5x1x50xi8>) -> tensor<?x2x128xf32> {
  %v = tq.from_bytes %vb : tensor<5x1x50xi8> -> !tq.cache<5x1x128, #tq.format<"turbo3_0">>
  %a = tq.accumulate %p, %v {lookup = #tq.lookup<tile>} : tensor<?x2x5xf32>, !tq.cache<5x1x128, #tq.format<"turbo3_0">> -> tensor<?x2x128xf32>
  return %a : tensor<?x2x128xf32>
}

// -----

// tqprod keys in registers: S q is computed once (a 32x32 projection of
// each query head), each row's QJL signs are decoded to +-1 lanes (word
// reads, as for the index planes) next to its polar values, and the
// step's value and sign chains (2 x 2 heads x 4 tokens = 16 vectors) share
// one sum tree; each score is scale * (<q, C> + ||r|| c <S q, sign>).
// CHECK-LABEL: func @score_tile_tqprod
// CHECK: %[[SQ:.*]] = linalg.generic {{.*}} ins(%arg0, %{{.*}} : tensor<1x2x32xf32>, tensor<32x32xf32>)
// CHECK: scf.for
// CHECK: arith.uitofp %{{.*}} : vector<16xi32> to vector<16xf32>
// CHECK: arith.subf
// CHECK: arith.uitofp %{{.*}} : vector<16xi32> to vector<16xf32>
// CHECK: arith.subf
// CHECK: tq.lane_lookup
// CHECK: tq.lane_lookup
// CHECK: vector.transfer_read %[[SQ]]
// Lanes 0-7 sum the values (head-major), 8-15 the signs; the sign sums
// take each row's ||r|| c.
// CHECK: %[[VALS:.*]] = vector.extract_strided_slice %[[ALL:.*]] {offsets = [0], sizes = [8], strides = [1]} : vector<16xf32> to vector<8xf32>
// CHECK: %[[SIGNS:.*]] = vector.extract_strided_slice %[[ALL]] {offsets = [8], sizes = [8], strides = [1]} : vector<16xf32> to vector<8xf32>
// CHECK: %[[WS:.*]] = vector.from_elements %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : vector<4xf32>
// CHECK: %[[WL:.*]] = vector.shuffle %[[WS]], %[[WS]] [0, 1, 2, 3, 0, 1, 2, 3]
// CHECK: %[[WEIGHTED:.*]] = arith.mulf %[[SIGNS]], %[[WL]] : vector<8xf32>
// CHECK: arith.addf %[[VALS]], %[[WEIGHTED]] : vector<8xf32>
func.func @score_tile_tqprod(%q: tensor<1x2x32xf32>, %kb: tensor<3x1x16xi8>) -> tensor<1x2x3xf32> {
  %k = tq.from_bytes %kb : tensor<3x1x16xi8> -> !tq.cache<3x1x32, #tq.format<"tqprod3">>
  %s = tq.score %q, %k {lookup = #tq.lookup<tile>} : tensor<1x2x32xf32>, !tq.cache<3x1x32, #tq.format<"tqprod3">> -> tensor<1x2x3xf32>
  return %s : tensor<1x2x3xf32>
}

// -----

// tqprod values, one query row: each head's loop-carried vectors hold its
// 2 value chunks and 2 sign-sum chunks (lanes 32..63 of a 64-lane output
// row); after the tokens, the sign sums are projected by S^T (a 32x32
// constant) and added to the values.
// CHECK-LABEL: func @accumulate_tile_tqprod
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK: arith.uitofp %{{.*}} : vector<16xi32> to vector<16xf32>
// CHECK: vector.transfer_write %{{.*}} : vector<2x16xf32>, tensor<1x2x64xf32>
// CHECK: %[[SUMS:.*]] = tensor.extract_slice %{{.*}}[0, 0, 32] [1, 2, 32] [1, 1, 1] : tensor<1x2x64xf32> to tensor<1x2x32xf32>
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction", "parallel"]} ins(%[[SUMS]], %{{.*}} : tensor<1x2x32xf32>, tensor<32x32xf32>)
func.func @accumulate_tile_tqprod(%p: tensor<1x2x3xf32>, %vb: tensor<3x1x16xi8>) -> tensor<1x2x32xf32> {
  %v = tq.from_bytes %vb : tensor<3x1x16xi8> -> !tq.cache<3x1x32, #tq.format<"tqprod3">>
  %a = tq.accumulate %p, %v {lookup = #tq.lookup<tile>} : tensor<1x2x3xf32>, !tq.cache<3x1x32, #tq.format<"tqprod3">> -> tensor<1x2x32xf32>
  return %a : tensor<1x2x32xf32>
}

// -----

// haar4 in registers: a loop first decodes each row to compute its
// scale / ||C[idx]|| (0 for a zero row); every score is then scaled by
// that factor. Its indices are whole bytes: a chunk is one 16-byte read
// (after the f32 scale) and a zero-extension, no shifts or masks.
// CHECK-LABEL: func @score_tile_haar
// CHECK: %[[F:.*]] = scf.for {{.*}} -> (tensor<3x1x1xf32>)
// CHECK: %[[ROW8:.*]] = vector.transfer_read %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}, %c4{{.*}}]{{.*}} : tensor<?x?x1x36xi8>, vector<32xi8>
// CHECK-NEXT: %[[ROW:.*]] = arith.extui %[[ROW8]] : vector<32xi8> to vector<32xi32>
// CHECK-NEXT: tq.lane_lookup %[[ROW]]
// CHECK: vector.reduction <add>
// CHECK: math.sqrt
// CHECK: arith.divf
// CHECK: scf.for {{.*}} -> (tensor<1x2x3xf32>)
// CHECK: %[[IDX8:.*]] = vector.transfer_read %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}, %c4{{.*}}]{{.*}} : tensor<?x?x1x36xi8>, vector<16xi8>
// CHECK-NEXT: %[[IDX:.*]] = arith.extui %[[IDX8]] : vector<16xi8> to vector<16xi32>
// CHECK-NEXT: tq.lane_lookup %[[IDX]]
// CHECK: tensor.extract %[[F]]
func.func @score_tile_haar(%q: tensor<1x2x32xf32>, %kb: tensor<3x1x36xi8>) -> tensor<1x2x3xf32> {
  %k = tq.from_bytes %kb : tensor<3x1x36xi8> -> !tq.cache<3x1x32, #tq.format<"haar4">>
  %s = tq.score %q, %k {lookup = #tq.lookup<tile>} : tensor<1x2x32xf32>, !tq.cache<3x1x32, #tq.format<"haar4">> -> tensor<1x2x3xf32>
  return %s : tensor<1x2x3xf32>
}

// -----

// tqprod adds the QJL correction through S q: a constant 32x32 projection,
// S q per query, and a sign-weighted sum per key.
// CHECK-LABEL: func @score_tqprod
// CHECK: arith.constant dense<{{.*}}> : tensor<32x32xf32>
// CHECK: arith.select %{{.*}}, %cst{{.*}}, %cst{{.*}} : f32
// CHECK-NOT: tq.
func.func @score_tqprod(%q: tensor<1x1x32xf32>, %kb: tensor<3x1x16xi8>) -> tensor<1x1x3xf32> {
  %k = tq.from_bytes %kb : tensor<3x1x16xi8> -> !tq.cache<3x1x32, #tq.format<"tqprod3">>
  %s = tq.score %q, %k : tensor<1x1x32xf32>, !tq.cache<3x1x32, #tq.format<"tqprod3">> -> tensor<1x1x3xf32>
  return %s : tensor<1x1x3xf32>
}

// -----

// A Hadamard rotation is a sign multiply, log2(4) = 2 butterfly stages
// (partner index j xor h, a + b below / a - b above) and the 1/sqrt(4)
// scale, in that order, as in lib/Quant; the zero padding and leading
// slice become loop nests too (no tensor.pad left).
// CHECK-LABEL: func @rotate_pad
// CHECK-NOT: tensor.pad
// CHECK: %[[SIGNS:.*]] = arith.constant dense<[1.000000e+00, -1.000000e+00, 1.000000e+00, 1.000000e+00]> : tensor<4xf32>
// CHECK: linalg.generic
// CHECK: tensor.extract %[[SIGNS]]
// CHECK: linalg.generic
// CHECK: arith.andi %{{.*}}, %c1
// CHECK: arith.xori %{{.*}}, %c1
// CHECK: arith.addf
// CHECK: arith.subf
// CHECK: linalg.generic
// CHECK: arith.xori %{{.*}}, %c2
// CHECK: %[[SCALE:.*]] = arith.constant 5.000000e-01 : f32
// CHECK: linalg.generic
// CHECK: arith.mulf %{{.*}}, %[[SCALE]]
// CHECK-NOT: tensor.pad
// CHECK-NOT: tensor.extract_slice
func.func @rotate_pad(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %zero = arith.constant 0.0 : f32
  %p = tensor.pad %x low[0, 0] high[0, 1] {
  ^bb0(%i: index, %j: index):
    tensor.yield %zero : f32
  } : tensor<2x3xf32> to tensor<2x4xf32>
  %r = tq.rotate %p {rotation = #tq.rotation<kind = hadamard, dim = 4, block = 4, signs1 = [1, -1, 1, 1]>} : tensor<2x4xf32>
  %s = tensor.extract_slice %r[0, 0] [2, 3] [1, 1] : tensor<2x4xf32> to tensor<2x3xf32>
  return %s : tensor<2x3xf32>
}

// -----

// Caches crossing function boundaries become page pools.
// CHECK-LABEL: func @boundary
// CHECK-SAME: (%{{.*}}: tensor<?x?x8x34xi8>) -> tensor<?x?x8x34xi8>
func.func @boundary(%c: !tq.cache<?x8x128, #tq.format<"turbo2_0">>) -> !tq.cache<?x8x128, #tq.format<"turbo2_0">> {
  return %c : !tq.cache<?x8x128, #tq.format<"turbo2_0">>
}

// -----

// A paged cache: row t (plus the tile offset t0) lives in page
// table[(t0 + t) / 16] at slot (t0 + t) % 16. The rows are addressed page
// by page: an outer loop over the table entries they touch (bounds from
// two divisions; the entry clamped to the sequence's last one), an inner
// one over the entry's rows that stores the page and a counting slot. The
// element loops read those addresses and divide by the page size no more.
// CHECK-LABEL: func @paged
// CHECK-SAME: (%[[Q:.*]]: tensor<1x1x32xf32>, %[[POOL:.*]]: tensor<?x16x1x34xi8>, %[[TABLE:.*]]: tensor<?xi32>, %[[N:.*]]: index, %[[T0:.*]]: index)
// CHECK: %[[CAST:.*]] = tensor.cast %[[POOL]] : tensor<?x16x1x34xi8> to tensor<?x?x1x34xi8>
// CHECK: %[[FIRST:.*]] = arith.addi %{{.*}}, %[[T0]] : index
// CHECK: %[[PS:.*]] = tensor.dim %[[CAST]], %c1
// CHECK: %[[END:.*]] = arith.addi %[[FIRST]], %[[N]] : index
// CHECK: %[[E0:.*]] = arith.divui %[[FIRST]], %[[PS]] : index
// CHECK: %[[E1:.*]] = arith.ceildivui %[[END]], %[[PS]] : index
// CHECK: %[[LASTROW:.*]] = arith.subi %[[N]], %{{.*}} : index
// CHECK: %[[LAST:.*]] = arith.divui %[[LASTROW]], %[[PS]] : index
// CHECK: %[[WALK:.*]]:2 = scf.for %[[E:.*]] = %[[E0]] to %[[E1]] step %{{.*}} iter_args(
// CHECK: %[[CLAMPED:.*]] = arith.minui %[[E]], %[[LAST]] : index
// CHECK: %[[PAGE:.*]] = tensor.extract %[[TABLE]][%[[CLAMPED]]] : tensor<?xi32>
// CHECK: %[[START:.*]] = arith.muli %[[E]], %[[PS]] : index
// CHECK: scf.for %[[R:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(
// CHECK-NOT: arith.divui
// CHECK: tensor.insert %[[PAGE]] into %{{.*}}[%[[R]]] : tensor<?xi32>
// CHECK: scf.yield
// CHECK-NOT: arith.divui %{{.*}}, %[[PS]]
// CHECK: %[[P32:.*]] = tensor.extract %[[WALK]]#0[%{{.*}}] : tensor<?xi32>
// CHECK: %[[P:.*]] = arith.index_castui %[[P32]] : i32 to index
// CHECK: %[[S32:.*]] = tensor.extract %[[WALK]]#1[%{{.*}}] : tensor<?xi32>
// CHECK: %[[S:.*]] = arith.index_castui %[[S32]] : i32 to index
// CHECK: tensor.extract %[[CAST]][%[[P]], %[[S]], %{{.*}}, %{{.*}}] : tensor<?x?x1x34xi8>
func.func @paged(%q: tensor<1x1x32xf32>, %pool: tensor<?x16x1x34xi8>, %table: tensor<?xi32>, %n: index, %t0: index) -> tensor<1x1x?xf32> {
  %k = tq.from_pages %pool[%table], %n : tensor<?x16x1x34xi8>, tensor<?xi32> -> !tq.cache<?x1x32, #tq.format<"q8_0">>
  %kt = tq.slice_tokens %k[%t0, %n] : !tq.cache<?x1x32, #tq.format<"q8_0">> -> !tq.cache<?x1x32, #tq.format<"q8_0">>
  %s = tq.score %q, %kt : tensor<1x1x32xf32>, !tq.cache<?x1x32, #tq.format<"q8_0">> -> tensor<1x1x?xf32>
  return %s : tensor<1x1x?xf32>
}

// -----

// The same cache read by the vector row decoder (lookup = tile): the
// address walk covers twice the tokens, and while row t is scored, row t
// of the range that follows is prefetched at walk position N + t. A step
// of 4 rows inside the cache whose first row's slot + 3 is below the page
// size takes that row's page and slot for all four (slot + k), and
// prefetches the next range's four the same way where they too are in one
// page; other steps look each row up.
// CHECK-LABEL: func @paged_tile
// CHECK-SAME: (%{{.*}}: tensor<1x1x32xf32>, %{{.*}}: tensor<?x16x1x34xi8>, %{{.*}}: tensor<?xi32>, %[[N:.*]]: index, %{{.*}}: index)
// CHECK: %[[ROWS:.*]] = arith.addi %[[N]], %[[N]] : index
// CHECK: tensor.empty(%[[ROWS]]) : tensor<?xi32>
// CHECK: %[[WALK:.*]]:2 = scf.for
// CHECK: scf.for %[[T:.*]] = %{{.*}} to %[[N]] step %c4
// CHECK: %[[P032:.*]] = tensor.extract %[[WALK]]#0[%[[T]]] : tensor<?xi32>
// CHECK: %[[P0:.*]] = arith.index_castui %[[P032]] : i32 to index
// CHECK: %[[S032:.*]] = tensor.extract %[[WALK]]#1[%[[T]]] : tensor<?xi32>
// CHECK: %[[S0:.*]] = arith.index_castui %[[S032]] : i32 to index
// CHECK: %[[TL:.*]] = arith.addi %[[T]], %c3 : index
// CHECK: arith.cmpi ult, %[[TL]], %[[N]] : index
// CHECK: %[[SL:.*]] = arith.addi %[[S0]], %c3 : index
// CHECK: arith.cmpi ult, %[[SL]], %{{.*}} : index
// CHECK: scf.if
// CHECK: %[[NEXT:.*]] = arith.addi %[[N]], %[[T]] : index
// CHECK: %[[P32:.*]] = tensor.extract %[[WALK]]#0[%[[NEXT]]] : tensor<?xi32>
// CHECK: %[[P:.*]] = arith.index_castui %[[P32]] : i32 to index
// CHECK: %[[S32:.*]] = tensor.extract %[[WALK]]#1[%[[NEXT]]] : tensor<?xi32>
// CHECK: %[[S:.*]] = arith.index_castui %[[S32]] : i32 to index
// CHECK: scf.if
// CHECK: memref.prefetch %{{.*}}[%[[P]], %{{.*}}, %{{.*}}, %c0{{.*}}], read
// CHECK: %[[S3:.*]] = arith.addi %[[S]], %c3{{.*}} : index
// CHECK: memref.prefetch %{{.*}}[%[[P]], %[[S3]], %{{.*}}, %c0{{.*}}], read
// CHECK: %[[R3:.*]] = arith.addi %[[S0]], %c3{{.*}} : index
// CHECK: vector.transfer_read %{{.*}}[%[[P0]], %[[R3]], %{{.*}}, %c2{{.*}}]{{.*}}: tensor<?x?x1x34xi8>, vector<16xi8>
// CHECK: } else {
// CHECK: %[[NEXT1:.*]] = arith.addi %[[N]], %[[T]] : index
// CHECK: %[[P132:.*]] = tensor.extract %[[WALK]]#0[%[[NEXT1]]] : tensor<?xi32>
// CHECK: %[[P1:.*]] = arith.index_castui %[[P132]] : i32 to index
// CHECK: %[[S132:.*]] = tensor.extract %[[WALK]]#1[%[[NEXT1]]] : tensor<?xi32>
// CHECK: %[[S1:.*]] = arith.index_castui %[[S132]] : i32 to index
// CHECK: memref.prefetch %{{.*}}[%[[P1]], %[[S1]], %{{.*}}, %c0{{.*}}], read
func.func @paged_tile(%q: tensor<1x1x32xf32>, %pool: tensor<?x16x1x34xi8>, %table: tensor<?xi32>, %n: index, %t0: index) -> tensor<1x1x?xf32> {
  %k = tq.from_pages %pool[%table], %n : tensor<?x16x1x34xi8>, tensor<?xi32> -> !tq.cache<?x1x32, #tq.format<"q8_0">>
  %kt = tq.slice_tokens %k[%t0, %n] : !tq.cache<?x1x32, #tq.format<"q8_0">> -> !tq.cache<?x1x32, #tq.format<"q8_0">>
  %s = tq.score %q, %kt {lookup = #tq.lookup<tile>} : tensor<1x1x32xf32>, !tq.cache<?x1x32, #tq.format<"q8_0">> -> tensor<1x1x?xf32>
  return %s : tensor<1x1x?xf32>
}

// -----

func.func @not_decomposed(%q: tensor<1x2x64xf32>, %k: !tq.cache<?x1x64, #tq.format<"q8_0">>) -> tensor<1x2x64xf32> {
  // expected-error @+1 {{tq.attention must be decomposed first (run tq-decompose-attention before tq-lower-to-loops)}}
  %o = tq.attention %q, %k, %k : tensor<1x2x64xf32>, !tq.cache<?x1x64, #tq.format<"q8_0">>, !tq.cache<?x1x64, #tq.format<"q8_0">> -> tensor<1x2x64xf32>
  return %o : tensor<1x2x64xf32>
}

// -----

// q8_0 encoding: per-32 amax (a reduction), d = amax / 127, round(x / d)
// (round half away from zero), then every output byte is picked from the
// field owning it: the fp16 scale (saturated) or an int8 value.
// CHECK-LABEL: func @quantize
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "reduction"]{{.*}} outs(%{{.*}} : tensor<4x1x2xf32>)
// CHECK: arith.maximumf
// CHECK: arith.divf %{{.*}}, %cst{{.*}} : f32
// CHECK: math.round
// CHECK: arith.fptosi
// CHECK: arith.truncf %{{.*}} : f32 to f16
// CHECK: arith.constant 31743 : i32
// CHECK: tensor.expand_shape
// CHECK: tensor.collapse_shape
// CHECK-NOT: tq.
func.func @quantize(%x: tensor<4x1x64xf32>) -> tensor<4x1x68xi8> {
  %c = tq.quantize %x : tensor<4x1x64xf32> -> !tq.cache<4x1x64, #tq.format<"q8_0">>
  %b = tq.to_bytes %c : !tq.cache<4x1x64, #tq.format<"q8_0">> -> tensor<4x1x68xi8>
  return %b : tensor<4x1x68xi8>
}

// -----

// A softmax's lse: the row maxima (sinks included) plus the log of the row
// sums, -inf where the sum is 0 (nothing visible, no sink).
// CHECK-LABEL: func @softmax_lse
// CHECK: %[[MAX:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]
// CHECK:   arith.maximumf
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]
// CHECK:   arith.addf
// CHECK: %[[P:.*]] = linalg.generic
// CHECK:   arith.divf
// CHECK: %[[LSE:.*]] = linalg.generic {{.*}} ins(%[[MAX]], %[[SUM]] : tensor<1x4xf32>, tensor<1x4xf32>)
// CHECK:   %[[SEEN:.*]] = arith.cmpf ogt
// CHECK:   %[[LOG:.*]] = math.log
// CHECK:   %[[L:.*]] = arith.addf %{{.*}}, %[[LOG]]
// CHECK:   arith.select %[[SEEN]], %[[L]], %{{.*}}
// CHECK: return %[[P]], %[[LSE]]
func.func @softmax_lse(%s: tensor<1x4x?xf32>, %sinks: tensor<4xf32>) -> (tensor<1x4x?xf32>, tensor<1x4xf32>) {
  %p, %l = tq.softmax %s sinks(%sinks : tensor<4xf32>) {scale = 1.0 : f32} : tensor<1x4x?xf32> -> tensor<1x4x?xf32>, tensor<1x4xf32>
  return %p, %l : tensor<1x4x?xf32>, tensor<1x4xf32>
}

// -----

// A GQA group of 32 (one kv head): scores and the weighted sum run the
// group in blocks of 16 heads, a loop over the blocks, so the unrolled
// body (16 multiply-add chains over 4 chunks, 16 accumulators per chunk)
// and the number of tensor writes do not grow with the group. Each
// block's output chunk is one 2-D write.
// CHECK-LABEL: func @large_group
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %c32{{.*}} step %c16{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (tensor<1x32x5xf32>)
// CHECK-COUNT-64: vector.transfer_read {{.*}} : tensor<1x32x64xf32>, vector<16xf32>
// CHECK-NOT: vector.transfer_read {{.*}} : tensor<1x32x64xf32>, vector<16xf32>
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %c32{{.*}} step %c16{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (tensor<1x32x64xf32>)
// CHECK: scf.for {{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {
// CHECK-COUNT-16: vector.fma
// CHECK-NOT: vector.fma
// CHECK: scf.yield
// CHECK: vector.transfer_write {{.*}} : vector<16x16xf32>, tensor<1x32x64xf32>
func.func @large_group(%q: tensor<1x32x64xf32>, %kb: tensor<5x1x34xi8>, %p: tensor<1x32x5xf32>) -> (tensor<1x32x5xf32>, tensor<1x32x64xf32>) {
  %k = tq.from_bytes %kb : tensor<5x1x34xi8> -> !tq.cache<5x1x64, #tq.format<"polar4">>
  %s = tq.score %q, %k {lookup = #tq.lookup<tile>} : tensor<1x32x64xf32>, !tq.cache<5x1x64, #tq.format<"polar4">> -> tensor<1x32x5xf32>
  %a = tq.accumulate %p, %k {lookup = #tq.lookup<tile>} : tensor<1x32x5xf32>, !tq.cache<5x1x64, #tq.format<"polar4">> -> tensor<1x32x64xf32>
  return %s, %a : tensor<1x32x5xf32>, tensor<1x32x64xf32>
}

// -----

// A prime group of 17 has no block between 1 and 16 that divides it: the
// blocks are single heads (one chain, one accumulator per chunk).
// CHECK-LABEL: func @prime_group
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %c17{{.*}} step %c1{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (tensor<1x17x5xf32>)
func.func @prime_group(%q: tensor<1x17x64xf32>, %kb: tensor<5x1x34xi8>) -> tensor<1x17x5xf32> {
  %k = tq.from_bytes %kb : tensor<5x1x34xi8> -> !tq.cache<5x1x64, #tq.format<"polar4">>
  %s = tq.score %q, %k {lookup = #tq.lookup<tile>} : tensor<1x17x64xf32>, !tq.cache<5x1x64, #tq.format<"polar4">> -> tensor<1x17x5xf32>
  return %s : tensor<1x17x5xf32>
}

// -----

// A gather of a scale * C[idx] format decodes whole rows with vector ops:
// per (token, head) row, the index planes widened to one lane per value,
// one tq.lane_lookup of the 8 levels, times the row's fp16 scale, written
// as one 128-lane row.
// CHECK-LABEL: func @gather_rows
// CHECK: scf.for %[[T:.*]] = %{{.*}} to %c5{{.*}} iter_args(
// CHECK: scf.for %[[H:.*]] = %{{.*}} iter_args(%[[OUT:.*]] = %{{.*}}) -> (tensor<5x1x128xf32>)
// CHECK: vector.transfer_read %{{.*}} : tensor<?x?x1x50xi8>, vector<50xi8>
// CHECK: %[[C:.*]] = tq.lane_lookup %{{.*}} [{{.*}}] : vector<128xi32> -> vector<128xf32>
// CHECK: vector.bitcast %{{.*}} : vector<2xi8> to vector<1xf16>
// CHECK: %[[ROW:.*]] = arith.mulf %{{.*}}, %[[C]] : vector<128xf32>
// CHECK: vector.transfer_write %[[ROW]], %[[OUT]][%[[T]], %[[H]], %{{.*}}] {{.*}} : vector<128xf32>, tensor<5x1x128xf32>
// CHECK-NOT: tq.gather
func.func @gather_rows(%kb: tensor<5x1x50xi8>) -> tensor<5x1x128xf32> {
  %k = tq.from_bytes %kb : tensor<5x1x50xi8> -> !tq.cache<5x1x128, #tq.format<"turbo3_0">>
  %g = tq.gather %k : !tq.cache<5x1x128, #tq.format<"turbo3_0">> -> tensor<5x1x128xf32>
  return %g : tensor<5x1x128xf32>
}

// -----

// haar4 rows are renormalised: a reduction of squared centroids per row,
// then scale / sqrt (0 for a zero row) multiplies every element.
// CHECK-LABEL: func @gather_haar
// CHECK: %[[NORMSQ:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]{{.*}} outs(%{{.*}} : tensor<3x1xf32>)
// CHECK: %[[F:.*]] = linalg.generic {{.*}} ins(%[[NORMSQ]] : tensor<3x1xf32>)
// CHECK:   math.sqrt
// CHECK:   arith.divf
// CHECK: linalg.generic {{.*}} ins(%[[F]] : tensor<3x1xf32>) outs(%{{.*}} : tensor<3x1x32xf32>)
// CHECK-NOT: tq.lane_lookup
func.func @gather_haar(%kb: tensor<3x1x36xi8>) -> tensor<3x1x32xf32> {
  %k = tq.from_bytes %kb : tensor<3x1x36xi8> -> !tq.cache<3x1x32, #tq.format<"haar4">>
  %g = tq.gather %k : !tq.cache<3x1x32, #tq.format<"haar4">> -> tensor<3x1x32xf32>
  return %g : tensor<3x1x32xf32>
}

// -----

// tqprod rows add the QJL reconstruction S^T sign (a reduction against the
// constant 32x32 projection) weighted by scale * ||r|| * c.
// CHECK-LABEL: func @gather_tqprod
// CHECK: %[[CORR:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%{{.*}} : tensor<32x32xf32>) outs(%{{.*}} : tensor<3x1x32xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[CORR]] : tensor<3x1x32xf32>) outs(%{{.*}} : tensor<3x1x32xf32>)
func.func @gather_tqprod(%kb: tensor<3x1x16xi8>) -> tensor<3x1x32xf32> {
  %k = tq.from_bytes %kb : tensor<3x1x16xi8> -> !tq.cache<3x1x32, #tq.format<"tqprod3">>
  %g = tq.gather %k : !tq.cache<3x1x32, #tq.format<"tqprod3">> -> tensor<3x1x32xf32>
  return %g : tensor<3x1x32xf32>
}

// -----

// The default lookup (select) for a weighted sum: one loop nest over
// (query, head, dim, token), the token loop innermost as the reduction;
// kv head = head / 2; each element is the block's scale times the
// centroid read from the 16-entry table.
// CHECK-DAG: #[[PMAP:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
// CHECK-DAG: #[[OMAP:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
// CHECK-LABEL: func @accumulate_select
// CHECK: %[[CB:.*]] = arith.constant dense<{{.*}}> : tensor<16xf32>
// CHECK: linalg.generic {indexing_maps = [#[[PMAP]], #[[OMAP]]], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%arg0 : tensor<1x2x5xf32>) outs(%{{.*}} : tensor<1x2x64xf32>)
// CHECK: %[[H:.*]] = linalg.index 1
// CHECK: arith.divui %[[H]], %c2
// CHECK: arith.andi %{{.*}}, %c15_i32
// CHECK: tensor.extract %[[CB]][%{{.*}}] : tensor<16xf32>
// CHECK-NOT: vector.
// CHECK-NOT: tq.
func.func @accumulate_select(%p: tensor<1x2x5xf32>, %vb: tensor<5x1x34xi8>) -> tensor<1x2x64xf32> {
  %v = tq.from_bytes %vb : tensor<5x1x34xi8> -> !tq.cache<5x1x64, #tq.format<"polar4">>
  %a = tq.accumulate %p, %v : tensor<1x2x5xf32>, !tq.cache<5x1x64, #tq.format<"polar4">> -> tensor<1x2x64xf32>
  return %a : tensor<1x2x64xf32>
}

// -----

// lookup = tile falls back to the element-wise loop nest when the query's
// width is not known to be the padded head dim (dynamic).
// CHECK-LABEL: func @score_tile_dynamic_width
// CHECK-NOT: tq.lane_lookup
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "reduction"]{{.*}} ins(%arg0 : tensor<1x2x?xf32>) outs(%{{.*}} : tensor<1x2x5xf32>)
// CHECK-NOT: vector.
func.func @score_tile_dynamic_width(%q: tensor<1x2x?xf32>, %kb: tensor<5x1x34xi8>) -> tensor<1x2x5xf32> {
  %k = tq.from_bytes %kb : tensor<5x1x34xi8> -> !tq.cache<5x1x64, #tq.format<"polar4">>
  %s = tq.score %q, %k {lookup = #tq.lookup<tile>} : tensor<1x2x?xf32>, !tq.cache<5x1x64, #tq.format<"polar4">> -> tensor<1x2x5xf32>
  return %s : tensor<1x2x5xf32>
}

// -----

// Dense products: GQA is the affine map h floordiv (q_heads / kv_heads).
// tq.qk reduces over the head dim (innermost); tq.pv reduces over the
// tokens outside the head dim, so the innermost loop streams rows.
// CHECK-DAG: #[[Q:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
// CHECK-DAG: #[[KV:.*]] = affine_map<(d0, d1, d2, d3) -> (d2, d1 floordiv 2, d3)>
// CHECK-DAG: #[[OUT:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
// CHECK-LABEL: func @dense_products
// CHECK: %[[N:.*]] = tensor.dim %arg1, %c0
// CHECK: %[[E:.*]] = tensor.empty(%[[N]]) : tensor<1x4x?xf32>
// CHECK: %[[Z:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E]] : tensor<1x4x?xf32>)
// CHECK: %[[S:.*]] = linalg.generic {indexing_maps = [#[[Q]], #[[KV]], #[[OUT]]], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%arg0, %arg1 : tensor<1x4x8xf32>, tensor<?x2x8xf32>) outs(%[[Z]] : tensor<1x4x?xf32>)
// CHECK:   arith.mulf
// CHECK:   arith.addf
// CHECK: %[[O:.*]] = linalg.generic {indexing_maps = [#[[OUT]], #[[KV]], #[[Q]]], iterator_types = ["parallel", "parallel", "reduction", "parallel"]} ins(%arg2, %arg1 : tensor<1x4x?xf32>, tensor<?x2x8xf32>)
// CHECK: return %[[S]], %[[O]]
func.func @dense_products(%q: tensor<1x4x8xf32>, %k: tensor<?x2x8xf32>, %p: tensor<1x4x?xf32>) -> (tensor<1x4x?xf32>, tensor<1x4x8xf32>) {
  %s = tq.qk %q, %k : tensor<1x4x8xf32>, tensor<?x2x8xf32> -> tensor<1x4x?xf32>
  %o = tq.pv %p, %k : tensor<1x4x?xf32>, tensor<?x2x8xf32> -> tensor<1x4x8xf32>
  return %s, %o : tensor<1x4x?xf32>, tensor<1x4x8xf32>
}

// -----

// Every masking option in the softmax's first loop nest, in order: scale,
// soft-cap (tanh), the f16 mask widened (a -inf cell hides its key) and
// scaled by the head's ALiBi slope, then causal (key <= position) and
// window (position - key < 3) visibility; hidden keys are -inf. Then the
// row max, exp (0 for a row that sees nothing) and the normalisation.
// CHECK-LABEL: func @softmax_options
// CHECK: linalg.generic {{.*}} ins(%arg0, %arg1, %arg2 : tensor<2x4x?xf32>, tensor<2x?xf16>, tensor<4xf32>)
// CHECK: ^bb0(%[[X:.*]]: f32, %[[M:.*]]: f16, %[[SLOPE:.*]]: f32, %{{.*}}: f32):
// CHECK:   arith.mulf %[[X]], %{{.*}} : f32
// CHECK:   arith.divf
// CHECK:   math.tanh
// CHECK:   %[[MF:.*]] = arith.extf %[[M]] : f16 to f32
// CHECK:   %[[HIDDEN:.*]] = arith.cmpf oeq, %[[MF]], %{{.*}} : f32
// CHECK:   arith.mulf %[[MF]], %[[SLOPE]] : f32
// CHECK:   arith.select %[[HIDDEN]]
// CHECK:   %[[CAUSAL:.*]] = arith.cmpi sle
// CHECK:   %[[W:.*]] = arith.constant 3 : index
// CHECK:   %[[INWINDOW:.*]] = arith.cmpi slt, %{{.*}}, %[[W]] : index
// CHECK:   %[[VISIBLE:.*]] = arith.andi %[[CAUSAL]], %[[INWINDOW]] : i1
// CHECK:   arith.select %[[VISIBLE]]
// CHECK: arith.maximumf
// CHECK: math.exp
// CHECK: arith.divf
// CHECK-NOT: tq.softmax
func.func @softmax_options(%s: tensor<2x4x?xf32>, %m: tensor<2x?xf16>, %slopes: tensor<4xf32>) -> tensor<2x4x?xf32> {
  %p = tq.softmax %s mask(%m : tensor<2x?xf16>) slopes(%slopes : tensor<4xf32>) {scale = 0.5 : f32, causal, window = 3, softcap = 20.0 : f32} : tensor<2x4x?xf32> -> tensor<2x4x?xf32>
  return %p : tensor<2x4x?xf32>
}

// -----

// A softmax without options applies only the scale: no tanh, no mask, no
// position test.
// CHECK-LABEL: func @softmax_plain
// CHECK-NOT: math.tanh
// CHECK-NOT: arith.cmpi
// CHECK: math.exp
// CHECK-NOT: math.log
// CHECK: return
func.func @softmax_plain(%s: tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  %p = tq.softmax %s {scale = 0.5 : f32} : tensor<1x4x8xf32> -> tensor<1x4x8xf32>
  return %p : tensor<1x4x8xf32>
}

// -----

// The flash ops: tq.num_tokens reads the pool's token count; the online
// softmax masks the tile at key offset %t0 (causal: key t0 + t against
// position n - queries + i), takes the tile max, the correction
// exp(max - new_max) (1 while nothing was seen), exp(x - new_max) (0 while
// nothing was seen) and the new sum, updating max and sum in place;
// merge_tile is acc * correction + tile in place; normalize divides by
// the sum (0 where it is 0).
// CHECK-LABEL: func @flash_ops
// CHECK-SAME: (%{{.*}}: tensor<?x1x34xi8>, %[[S:.*]]: tensor<1x2x?xf32>, %[[MAX:.*]]: tensor<1x2xf32>, %[[SUM:.*]]: tensor<1x2xf32>, %[[T0:.*]]: index, %[[ACC:.*]]: tensor<1x2x64xf32>)
// CHECK: %[[N:.*]] = tensor.dim %{{.*}}, %c1{{.*}} : tensor<?x?x1x34xi8>
// CHECK: %[[FIRST:.*]] = arith.subi %[[N]], %{{.*}} : index
// CHECK: %[[MASKED:.*]] = linalg.generic {{.*}} ins(%[[S]] : tensor<1x2x?xf32>)
// CHECK:   %[[POS:.*]] = arith.addi %[[FIRST]], %{{.*}} : index
// CHECK:   %[[KEY:.*]] = arith.addi %[[T0]], %{{.*}} : index
// CHECK:   arith.cmpi sle, %[[KEY]], %[[POS]] : index
// CHECK: %[[TILEMAX:.*]] = linalg.generic {{.*}} ins(%[[MASKED]] : tensor<1x2x?xf32>)
// CHECK: %[[CORR:.*]] = linalg.generic {{.*}} ins(%[[MAX]], %[[TILEMAX]] : tensor<1x2xf32>, tensor<1x2xf32>)
// CHECK:   arith.constant 1.000000e+00 : f32
// CHECK: %[[NEWMAX:.*]] = linalg.generic {{.*}} ins(%[[TILEMAX]] : tensor<1x2xf32>) outs(%[[MAX]] : tensor<1x2xf32>)
// CHECK: %[[P:.*]] = linalg.generic {{.*}} ins(%[[MASKED]], %[[NEWMAX]] : tensor<1x2x?xf32>, tensor<1x2xf32>)
// CHECK: %[[SCALED:.*]] = linalg.generic {{.*}} ins(%[[CORR]] : tensor<1x2xf32>) outs(%[[SUM]] : tensor<1x2xf32>)
// CHECK: %[[NEWSUM:.*]] = linalg.generic {{.*}} ins(%[[P]] : tensor<1x2x?xf32>) outs(%[[SCALED]] : tensor<1x2xf32>)
// CHECK: %[[MERGED:.*]] = linalg.generic {{.*}} ins(%[[CORR]], %[[ACC]] : tensor<1x2xf32>, tensor<1x2x64xf32>) outs(%[[ACC]] : tensor<1x2x64xf32>)
// CHECK:   arith.mulf
// CHECK:   arith.addf
// CHECK: %[[OUT:.*]] = linalg.generic {{.*}} ins(%[[MERGED]], %[[NEWSUM]] : tensor<1x2x64xf32>, tensor<1x2xf32>)
// CHECK:   arith.cmpf ogt
// CHECK:   arith.divf
// CHECK: return %[[N]], %[[P]], %[[NEWMAX]], %[[NEWSUM]], %[[OUT]]
func.func @flash_ops(%kb: tensor<?x1x34xi8>, %s: tensor<1x2x?xf32>, %m: tensor<1x2xf32>, %l: tensor<1x2xf32>, %t0: index, %acc: tensor<1x2x64xf32>) -> (index, tensor<1x2x?xf32>, tensor<1x2xf32>, tensor<1x2xf32>, tensor<1x2x64xf32>) {
  %k = tq.from_bytes %kb : tensor<?x1x34xi8> -> !tq.cache<?x1x64, #tq.format<"polar4">>
  %n = tq.num_tokens %k : !tq.cache<?x1x64, #tq.format<"polar4">>
  %p, %m1, %l1, %c = tq.online_softmax %s, %m, %l, %t0, %n {scale = 1.0 : f32, causal} : tensor<1x2x?xf32>, tensor<1x2xf32> -> tensor<1x2x?xf32>
  %a = tq.merge_tile %acc, %c, %acc : tensor<1x2x64xf32>, tensor<1x2xf32>
  %o = tq.normalize %a, %l1 : tensor<1x2x64xf32>, tensor<1x2xf32>
  return %n, %p, %m1, %l1, %o : index, tensor<1x2x?xf32>, tensor<1x2xf32>, tensor<1x2xf32>, tensor<1x2x64xf32>
}

// -----

// tq.combine: the global max over the splits, the weighted sums of the
// partial sums and of the accumulators (a split that saw nothing weighs
// 0), then their quotient (0 where nothing was visible).
// CHECK-DAG: #[[PARTS:.*]] = affine_map<(d0, d1, d2) -> (d2, d0, d1)>
// CHECK-DAG: #[[ROWS:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func @combine
// CHECK: %[[M:.*]] = linalg.generic {indexing_maps = [#[[PARTS]], #[[ROWS]]], iterator_types = ["parallel", "parallel", "reduction"]} ins(%arg0 : tensor<3x1x2xf32>)
// CHECK:   arith.maximumf
// CHECK: %[[L:.*]] = linalg.generic {{.*}} ins(%arg0, %arg1, %[[M]] : tensor<3x1x2xf32>, tensor<3x1x2xf32>, tensor<1x2xf32>)
// CHECK:   math.exp
// CHECK: %[[A:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%arg0, %[[M]], %arg2 : tensor<3x1x2xf32>, tensor<1x2xf32>, tensor<3x1x2x64xf32>)
// CHECK: %[[O:.*]] = linalg.generic {{.*}} ins(%[[A]], %[[L]] : tensor<1x2x64xf32>, tensor<1x2xf32>)
// CHECK:   arith.divf
// CHECK: return %[[O]]
func.func @combine(%m: tensor<3x1x2xf32>, %l: tensor<3x1x2xf32>, %a: tensor<3x1x2x64xf32>) -> tensor<1x2x64xf32> {
  %o = tq.combine %m, %l, %a : tensor<3x1x2xf32>, tensor<3x1x2x64xf32> -> tensor<1x2x64xf32>
  return %o : tensor<1x2x64xf32>
}

// -----

// A static cache's token count is a constant; a token range's is its size
// (the range is addressed by its readers, the pool is unchanged).
// CHECK-LABEL: func @token_counts
// CHECK-SAME: (%{{.*}}: tensor<7x1x34xi8>, %{{.*}}: index, %[[SIZE:.*]]: index)
// CHECK: %[[C7:.*]] = arith.constant 7 : index
// CHECK: %[[R:.*]] = arith.addi %[[C7]], %[[SIZE]] : index
// CHECK: return %[[R]]
func.func @token_counts(%kb: tensor<7x1x34xi8>, %t0: index, %size: index) -> index {
  %k = tq.from_bytes %kb : tensor<7x1x34xi8> -> !tq.cache<7x1x64, #tq.format<"polar4">>
  %kt = tq.slice_tokens %k[%t0, %size] : !tq.cache<7x1x64, #tq.format<"polar4">> -> !tq.cache<?x1x64, #tq.format<"polar4">>
  %n = tq.num_tokens %k : !tq.cache<7x1x64, #tq.format<"polar4">>
  %m = tq.num_tokens %kt : !tq.cache<?x1x64, #tq.format<"polar4">>
  %s = arith.addi %n, %m : index
  return %s : index
}

// -----

// The identity rotation is its input; a Haar rotation is a product with
// its constant dense matrix, accumulated in f64; the inverse uses the
// transposed matrix.
// CHECK-LABEL: func @rotations
// CHECK: %[[R:.*]] = arith.constant dense<{{\[\[}}[[R00:[-0-9.e]+]], [[R01:[-0-9.e]+]], {{.*}}> : tensor<4x4xf64>
// CHECK: linalg.generic {{.*}} ins(%arg0, %[[R]] : tensor<2x4xf32>, tensor<4x4xf64>)
// CHECK:   arith.extf %{{.*}} : f32 to f64
// CHECK: arith.truncf %{{.*}} : f64 to f32
// CHECK: %[[RT:.*]] = arith.constant dense<{{\[\[}}[[R00]], {{[-0-9.e]+}}, {{.*}}], {{\[}}[[R01]], {{.*}}> : tensor<4x4xf64>
// CHECK: linalg.generic {{.*}} ins(%arg0, %[[RT]] : tensor<2x4xf32>, tensor<4x4xf64>)
// CHECK: return %arg0,
func.func @rotations(%x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) {
  %a = tq.rotate %x {rotation = #tq.rotation<kind = identity, dim = 4>} : tensor<2x4xf32>
  %b = tq.rotate %x {rotation = #tq.rotation<kind = haar, dim = 4, seed = 3>} : tensor<2x4xf32>
  %c = tq.rotate %x {rotation = #tq.rotation<kind = haar, dim = 4, seed = 3>, inverse} : tensor<2x4xf32>
  return %a, %b, %c : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// Negative: pads with low padding or a dynamic padded size, and slices
// that do not start at 0, are not the zero padding of a head; they stay
// for the usual bufferization.
// CHECK-LABEL: func @other_pads_and_slices
// CHECK: tensor.pad %arg0 low[1, 0] high[0, 1]
// CHECK: tensor.pad %arg0 low[0, 0] high[0, %arg1]
// CHECK: tensor.extract_slice %arg0[0, 1] [2, 2] [1, 1]
// CHECK-NOT: linalg.generic
func.func @other_pads_and_slices(%x: tensor<2x3xf32>, %n: index) -> (tensor<3x4xf32>, tensor<2x?xf32>, tensor<2x2xf32>) {
  %zero = arith.constant 0.0 : f32
  %a = tensor.pad %x low[1, 0] high[0, 1] {
  ^bb0(%i: index, %j: index):
    tensor.yield %zero : f32
  } : tensor<2x3xf32> to tensor<3x4xf32>
  %b = tensor.pad %x low[0, 0] high[0, %n] {
  ^bb0(%i: index, %j: index):
    tensor.yield %zero : f32
  } : tensor<2x3xf32> to tensor<2x?xf32>
  %c = tensor.extract_slice %x[0, 1] [2, 2] [1, 1] : tensor<2x3xf32> to tensor<2x2xf32>
  return %a, %b, %c : tensor<3x4xf32>, tensor<2x?xf32>, tensor<2x2xf32>
}

// -----

// Negative: the dense products need static head counts (the GQA group is
// a constant of the affine map); with a dynamic one the pass refuses the
// op before converting, naming the dim (the conversion itself would only
// say "failed to legalize").
func.func @qk_dynamic_heads(%q: tensor<1x?x8xf32>, %k: tensor<4x2x8xf32>) -> tensor<1x?x4xf32> {
  // expected-error @+1 {{'tq.qk' op cannot be lowered to loops: dim 1 (the query heads of the query) of 'tensor<1x?x8xf32>' is dynamic; it must be static, since the GQA group (query heads per kv head) is a constant of the lowered loops}}
  %s = tq.qk %q, %k : tensor<1x?x8xf32>, tensor<4x2x8xf32> -> tensor<1x?x4xf32>
  return %s : tensor<1x?x4xf32>
}

// -----

func.func @pv_dynamic_heads(%p: tensor<1x4x4xf32>, %v: tensor<4x?x8xf32>) -> tensor<1x4x8xf32> {
  // expected-error @+1 {{'tq.pv' op cannot be lowered to loops: dim 1 (the kv heads of the values) of 'tensor<4x?x8xf32>' is dynamic}}
  %o = tq.pv %p, %v : tensor<1x4x4xf32>, tensor<4x?x8xf32> -> tensor<1x4x8xf32>
  return %o : tensor<1x4x8xf32>
}

// -----

// The keys' kv head count is the other half of the group.
func.func @qk_dynamic_kv_heads(%q: tensor<1x4x8xf32>, %k: tensor<4x?x8xf32>) -> tensor<1x4x4xf32> {
  // expected-error @+1 {{'tq.qk' op cannot be lowered to loops: dim 1 (the kv heads of the keys) of 'tensor<4x?x8xf32>' is dynamic}}
  %s = tq.qk %q, %k : tensor<1x4x8xf32>, tensor<4x?x8xf32> -> tensor<1x4x4xf32>
  return %s : tensor<1x4x4xf32>
}

// -----

// Every such op is reported, not only the first.
func.func @pv_dynamic_query_heads(%p: tensor<1x?x4xf32>, %v: tensor<4x2x8xf32>, %p2: tensor<2x?x4xf32>) -> (tensor<1x?x8xf32>, tensor<2x?x8xf32>) {
  // expected-error @+1 {{'tq.pv' op cannot be lowered to loops: dim 1 (the query heads of the probabilities) of 'tensor<1x?x4xf32>' is dynamic}}
  %o = tq.pv %p, %v : tensor<1x?x4xf32>, tensor<4x2x8xf32> -> tensor<1x?x8xf32>
  // expected-error @+1 {{'tq.pv' op cannot be lowered to loops: dim 1 (the query heads of the probabilities) of 'tensor<2x?x4xf32>' is dynamic}}
  %o2 = tq.pv %p2, %v : tensor<2x?x4xf32>, tensor<4x2x8xf32> -> tensor<2x?x8xf32>
  return %o, %o2 : tensor<1x?x8xf32>, tensor<2x?x8xf32>
}

// -----

// Negative: the fused ops need a static number of query heads (the GQA
// group decides which cache rows a head reads), for every lookup.
func.func @score_dynamic_heads(%q: tensor<1x?x64xf32>, %kb: tensor<5x1x34xi8>) -> tensor<1x?x5xf32> {
  %k = tq.from_bytes %kb : tensor<5x1x34xi8> -> !tq.cache<5x1x64, #tq.format<"polar4">>
  // expected-error @+1 {{'tq.score' op cannot be lowered to loops: dim 1 (the query heads of the query) of 'tensor<1x?x64xf32>' is dynamic}}
  %s = tq.score %q, %k : tensor<1x?x64xf32>, !tq.cache<5x1x64, #tq.format<"polar4">> -> tensor<1x?x5xf32>
  return %s : tensor<1x?x5xf32>
}

// -----

func.func @accumulate_dynamic_heads(%p: tensor<1x?x5xf32>, %kb: tensor<5x1x34xi8>) -> tensor<1x?x64xf32> {
  %k = tq.from_bytes %kb : tensor<5x1x34xi8> -> !tq.cache<5x1x64, #tq.format<"polar4">>
  // expected-error @+1 {{'tq.accumulate' op cannot be lowered to loops: dim 1 (the query heads of the probabilities) of 'tensor<1x?x5xf32>' is dynamic}}
  %a = tq.accumulate %p, %k {lookup = #tq.lookup<tile>} : tensor<1x?x5xf32>, !tq.cache<5x1x64, #tq.format<"polar4">> -> tensor<1x?x64xf32>
  return %a : tensor<1x?x64xf32>
}

// -----

// Each format family's encoder: an index is the count of thresholds a
// value reaches, one compare per threshold of the codebook (2^bits - 1);
// the scale is stored as fp16 except by haar4 (f32); the bytes are a pool
// of one page.
// CHECK-LABEL: func @quantize_f16
// CHECK-SAME: -> tensor<?x?x1x128xi8>
// CHECK-NOT: arith.cmpf oge
// CHECK: arith.truncf %{{.*}} : f32 to f16
// CHECK-NOT: tq.
func.func @quantize_f16(%x: tensor<2x1x64xf32>) -> !tq.cache<2x1x64, #tq.format<"f16">> {
  %c = tq.quantize %x : tensor<2x1x64xf32> -> !tq.cache<2x1x64, #tq.format<"f16">>
  return %c : !tq.cache<2x1x64, #tq.format<"f16">>
}

// -----

// CHECK-LABEL: func @quantize_turbo3
// CHECK-SAME: -> tensor<?x?x1x50xi8>
// CHECK: math.sqrt
// CHECK-COUNT-7: arith.cmpf oge
// CHECK-NOT: arith.cmpf oge
// CHECK: arith.truncf %{{.*}} : f32 to f16
// CHECK-NOT: tq.
func.func @quantize_turbo3(%x: tensor<2x1x64xf32>) -> !tq.cache<2x1x64, #tq.format<"turbo3_0">> {
  %c = tq.quantize %x : tensor<2x1x64xf32> -> !tq.cache<2x1x64, #tq.format<"turbo3_0">>
  return %c : !tq.cache<2x1x64, #tq.format<"turbo3_0">>
}

// -----

// CHECK-LABEL: func @quantize_tq3
// CHECK-SAME: -> tensor<?x?x1x28xi8>
// CHECK: math.absf
// CHECK-COUNT-7: arith.cmpf oge
// CHECK-NOT: arith.cmpf oge
// CHECK-NOT: tq.
func.func @quantize_tq3(%x: tensor<2x1x64xf32>) -> !tq.cache<2x1x64, #tq.format<"tq3_0">> {
  %c = tq.quantize %x : tensor<2x1x64xf32> -> !tq.cache<2x1x64, #tq.format<"tq3_0">>
  return %c : !tq.cache<2x1x64, #tq.format<"tq3_0">>
}

// -----

// CHECK-LABEL: func @quantize_polar3
// CHECK-SAME: -> tensor<?x?x1x26xi8>
// CHECK-COUNT-7: arith.cmpf oge
// CHECK-NOT: arith.cmpf oge
// CHECK-NOT: tq.
func.func @quantize_polar3(%x: tensor<2x1x64xf32>) -> !tq.cache<2x1x64, #tq.format<"polar3">> {
  %c = tq.quantize %x : tensor<2x1x64xf32> -> !tq.cache<2x1x64, #tq.format<"polar3">>
  return %c : !tq.cache<2x1x64, #tq.format<"polar3">>
}

// -----

// tqprod3: a 2-bit polar index (3 thresholds) plus the QJL signs of the
// residual and its norm (a second fp16 field).
// CHECK-LABEL: func @quantize_tqprod3
// CHECK-SAME: -> tensor<?x?x1x16xi8>
// CHECK-COUNT-2: math.sqrt
// CHECK-COUNT-2: arith.truncf %{{.*}} : f32 to f16
// CHECK-NOT: tq.
func.func @quantize_tqprod3(%x: tensor<2x1x32xf32>) -> !tq.cache<2x1x32, #tq.format<"tqprod3">> {
  %c = tq.quantize %x : tensor<2x1x32xf32> -> !tq.cache<2x1x32, #tq.format<"tqprod3">>
  return %c : !tq.cache<2x1x32, #tq.format<"tqprod3">>
}

// -----

// CHECK-LABEL: func @quantize_haar4
// CHECK-SAME: -> tensor<?x?x1x36xi8>
// CHECK-COUNT-15: arith.cmpf oge
// CHECK-NOT: arith.cmpf oge
// CHECK-NOT: arith.truncf %{{.*}} : f32 to f16
// CHECK-NOT: tq.
func.func @quantize_haar4(%x: tensor<2x1x32xf32>) -> !tq.cache<2x1x32, #tq.format<"haar4">> {
  %c = tq.quantize %x : tensor<2x1x32xf32> -> !tq.cache<2x1x32, #tq.format<"haar4">>
  return %c : !tq.cache<2x1x32, #tq.format<"haar4">>
}

// -----

// haar4 keeps 4-bit indices in whole bytes: the per-query table has 16
// columns, and a byte above 15 reads its column mod 16 (as lib/Quant's
// decoder does) instead of past the table's row; the row factors'
// centroid reads are masked the same way.
// CHECK-LABEL: func @score_lut_haar4_masks_the_index_byte
// CHECK: %[[BYTE:.*]] = arith.andi %{{.*}}, %c255_i32 : i32
// CHECK: %[[SHIFTED:.*]] = arith.shli %[[BYTE]], %{{.*}} : i32
// CHECK: %[[IDX:.*]] = arith.ori %c0_i32, %[[SHIFTED]] : i32
// CHECK: %[[C15:.*]] = arith.constant 15 : i32
// CHECK: %[[MASKED:.*]] = arith.andi %[[IDX]], %[[C15]] : i32
// CHECK: %[[COL:.*]] = arith.index_castui %[[MASKED]] : i32 to index
// CHECK: tensor.extract %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}, %[[COL]]] : tensor<1x1x4x16xf32>
// CHECK: arith.andi %{{.*}}, %c15_i32 : i32
// CHECK: tensor.extract %{{.*}} : tensor<16xf32>
func.func @score_lut_haar4_masks_the_index_byte(%q: tensor<1x1x4xf32>, %kb: tensor<3x1x8xi8>) -> tensor<1x1x3xf32> {
  %k = tq.from_bytes %kb : tensor<3x1x8xi8> -> !tq.cache<3x1x4, #tq.format<"haar4">>
  %s = tq.score %q, %k {lookup = #tq.lookup<lut>} : tensor<1x1x4xf32>, !tq.cache<3x1x4, #tq.format<"haar4">> -> tensor<1x1x3xf32>
  return %s : tensor<1x1x3xf32>
}
