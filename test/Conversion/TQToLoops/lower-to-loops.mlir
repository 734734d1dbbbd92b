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

// One query row: the rows' scales are gathered (a loop over the tokens)
// and each head's weights multiplied by them (a loop over the group's
// heads around one over contiguous tokens: it vectorises), then the
// weighted sum keeps its output in loop-carried vectors (2 heads x 8
// chunks = 16 accumulators, one pass over the tokens) and writes each
// chunk of both heads once after the token loop, as one 2-D write; lanes
// are in row order (each chunk's fields are word reads of the row).
// CHECK-LABEL: func @accumulate_tile_one_row
// CHECK: %[[CACHE:.*]] = tensor.cast %{{.*}} : tensor<1x5x1x50xi8> to tensor<?x?x1x50xi8>
// CHECK: %[[SCALES:.*]] = scf.for %[[U:.*]] = %c0{{.*}} to %c5{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (tensor<5xf32>)
// CHECK: %[[UROW:.*]] = arith.addi %c0{{.*}}, %[[U]] : index
// CHECK: vector.transfer_read %[[CACHE]][%{{.*}}, %[[UROW]], %{{.*}}, %c0{{.*}}]{{.*}} vector<2xi8>
// CHECK: %[[W:.*]] = scf.for %[[HH:.*]] = %c0{{.*}} to %c2{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (tensor<2x5xf32>)
// CHECK: %[[H:.*]] = arith.addi %{{.*}}, %[[HH]] : index
// CHECK: scf.for %[[S:.*]] = %c0{{.*}} to %c5{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (tensor<2x5xf32>)
// CHECK: %[[P0:.*]] = tensor.extract %arg0[%c0{{.*}}, %[[H]], %[[S]]] : tensor<1x2x5xf32>
// CHECK: %[[SC:.*]] = tensor.extract %[[SCALES]][%[[S]]] : tensor<5xf32>
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
// CHECK: %[[PAGE32:.*]] = tensor.extract %[[TABLE]][%[[CLAMPED]]] : tensor<?xi32>
// CHECK: %[[PAGE:.*]] = arith.index_cast %[[PAGE32]] : i32 to index
// CHECK: %[[START:.*]] = arith.muli %[[E]], %[[PS]] : index
// CHECK: scf.for %[[R:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(
// CHECK-NOT: arith.divui
// CHECK: tensor.insert %[[PAGE]] into %{{.*}}[%[[R]]] : tensor<?xindex>
// CHECK: scf.yield
// CHECK-NOT: arith.divui %{{.*}}, %[[PS]]
// CHECK: %[[P:.*]] = tensor.extract %[[WALK]]#0[%{{.*}}] : tensor<?xindex>
// CHECK: %[[S:.*]] = tensor.extract %[[WALK]]#1[%{{.*}}] : tensor<?xindex>
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
// of the range that follows is prefetched at walk position N + t.
// CHECK-LABEL: func @paged_tile
// CHECK-SAME: (%{{.*}}: tensor<1x1x32xf32>, %{{.*}}: tensor<?x16x1x34xi8>, %{{.*}}: tensor<?xi32>, %[[N:.*]]: index, %{{.*}}: index)
// CHECK: %[[ROWS:.*]] = arith.addi %[[N]], %[[N]] : index
// CHECK: tensor.empty(%[[ROWS]]) : tensor<?xindex>
// CHECK: %[[WALK:.*]]:2 = scf.for
// CHECK: scf.for %[[T:.*]] = %{{.*}} to %[[N]] step %c4
// CHECK: %[[NEXT:.*]] = arith.addi %[[N]], %[[T]] : index
// CHECK: %[[P:.*]] = tensor.extract %[[WALK]]#0[%[[NEXT]]] : tensor<?xindex>
// CHECK: %[[S:.*]] = tensor.extract %[[WALK]]#1[%[[NEXT]]] : tensor<?xindex>
// CHECK: memref.prefetch %{{.*}}[%[[P]], %[[S]], %{{.*}}, %c0{{.*}}], read
// CHECK: tensor.extract %[[WALK]]#0[%[[T]]] : tensor<?xindex>
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
