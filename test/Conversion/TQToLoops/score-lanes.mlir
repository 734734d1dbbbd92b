// tq-lower-to-loops{score-dot=i8 score-lanes=tokens}: the int8 score with
// one query row laid out by tokens. Steps of 16 tokens; per piece of a
// row (64 values of a 2-bit plane) and group of four tokens, 16 bytes of
// each plane per token, the fields gathered by tq.select_bits, the two
// planes joined by a bit select, one tq.byte_lookup and a tq.byte_dot per
// head; per head and block, the four groups' partial sums added by two
// rounds of interleaves into the 16 tokens' scores, in token order.

// RUN: tq-opt %s -split-input-file --tq-lower-to-loops="score-dot=i8 score-lanes=tokens" | FileCheck %s
// RUN: tq-opt %s -split-input-file --tq-lower-to-loops="score-dot=i8" | FileCheck %s --check-prefix=ROWS
// RUN: tq-opt %s -split-input-file --tq-lower-to-loops="score-dot=i8 score-lanes=blocks" | FileCheck %s --check-prefix=BLOCKS
// RUN: tq-opt %s -split-input-file --tq-lower-to-loops="score-dot=i8 score-lanes=shifts" | FileCheck %s --check-prefix=SHIFTS
// RUN: not tq-opt %s -split-input-file --tq-lower-to-loops="score-dot=i8 score-lanes=columns" 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: tq-lower-to-loops: score-lanes must be rows, tokens, blocks or shifts, got 'columns'

// turbo3_0 at 128: planes of 2 bits (bytes 2..33) and 1 bit (34..49).
// The query's lanes follow the level vectors: values 0-7 and 32-39 first.
// CHECK-LABEL: func @turbo3
// CHECK: vector.shuffle %{{.*}} [0, 1, 2, 3, 4, 5, 6, 7, 32, 33, 34, 35, 36, 37, 38, 39, 8, 9,
// The query bytes copied once per group of four tokens (group g's dots
// read copy g, so LLVM cannot merge the groups' query loads into values
// live across the step), each run of 16 bytes repeated to the four lanes
// (a dot's query operand is one full-width load, no broadcast shuffle).
// CHECK: tensor.expand_shape %{{.*}} {{\[}}[0], [1], [2, 3]] output_shape [1, 2, 8, 16] : tensor<1x2x128xi8> into tensor<1x2x8x16xi8>
// CHECK: tensor.insert_slice %{{.*}}[0, 0, 0, 0, 0] [1, 1, 2, 8, 16] [1, 1, 1, 1, 1] : tensor<1x2x8x16xi8> into tensor<4x1x2x8x64xi8>
// CHECK: tensor.insert_slice %{{.*}}[0, 0, 0, 0, 48] [1, 1, 2, 8, 16] [1, 1, 1, 1, 1] : tensor<1x2x8x16xi8> into tensor<4x1x2x8x64xi8>
// CHECK: %[[COPIES:.*]] = tensor.insert_slice %{{.*}}[3, 0, 0, 0, 48] [1, 1, 2, 8, 16] [1, 1, 1, 1, 1] : tensor<1x2x8x16xi8> into tensor<4x1x2x8x64xi8>
// CHECK: scf.for %{{.*}} step %c16
// The 16 rows' fp16 norms (bytes 0..1) as bits, widened together (no
// scalar conversion per row).
// CHECK: vector.transfer_read %{{.*}}%c0{{.*}} : tensor<?x?x1x50xi8>, vector<2xi8>
// CHECK-NOT: arith.extf %{{.*}} : f16 to f32
// CHECK: vector.from_elements {{.*}} : vector<16xi16>
// CHECK: vector.bitcast %{{.*}} : vector<16xi16> to vector<16xf16>
// CHECK: arith.extf %{{.*}} : vector<16xf16> to vector<16xf32>
// Four tokens' 16 bytes of the 2-bit plane from byte 2, of the 1-bit plane
// from byte 34 (its first 8 bytes in both halves of a lane).
// CHECK: vector.transfer_read %{{.*}}%c2{{.*}} : tensor<?x?x1x50xi8>, vector<16xi8>
// CHECK: vector.transfer_read %{{.*}}%c34{{.*}} : tensor<?x?x1x50xi8>, vector<16xi8>
// CHECK: vector.shuffle %{{.*}} [0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17,
// Value 0's 2-bit field at bit 0, value 1's at 2, ...; the second half's
// first value (32) at bit 0 of its own 8 bytes. Value 0's high bit sits
// at bit 0 of the 1-bit plane and goes to bit 2 (offset 62); value 32's at
// bit 32 (offset 30).
// CHECK: tq.select_bits %{{.*}} [0, 2, 4, 6, 8, 10, 12, 14, 0, 2, 4, 6, 8, 10, 12, 14,
// CHECK: tq.select_bits %{{.*}} [62, 63, 0, 1, 2, 3, 4, 5, 30, 31, 32, 33, 34, 35, 36, 37,
// CHECK: arith.andi
// CHECK: arith.ori
// CHECK: tq.byte_lookup %{{.*}} : vector<64xi8>
// CHECK-NOT: vector.shuffle %{{.*}} [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1,
// CHECK: vector.transfer_read %[[COPIES]][%c0{{[_0-9]*}}, %c0{{[_0-9]*}}, %{{.*}}, %c0{{[_0-9]*}}, %c0{{[_0-9]*}}]{{.*}} : tensor<4x1x2x8x64xi8>, vector<64xi8>
// CHECK-COUNT-2: tq.byte_dot %{{.*}} : vector<64xi8> -> vector<16xi32>
// The four groups' sums of a head: interleaves of i32 lanes.
// CHECK: vector.shuffle %{{.*}} [0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29] : vector<16xi32>, vector<16xi32>
// CHECK: vector.transfer_read %[[COPIES]][%c3{{[_0-9]*}}, %c0{{[_0-9]*}}, %{{.*}}, %c0{{[_0-9]*}}, %c0{{[_0-9]*}}]
// CHECK: arith.sitofp %{{.*}} : vector<16xi32> to vector<16xf32>
// CHECK: vector.transfer_write %{{.*}} : vector<16xf32>, tensor<1x2x5xf32>
// ROWS-LABEL: func @turbo3
// ROWS-NOT: tq.select_bits
// ROWS: tq.byte_dot
// score-lanes=shifts: no tq.select_bits. A piece is the 16 bytes of the
// 2-bit plane (64 values); level vector f holds field f of each byte
// (lane byte i: value 4i + f), so the query's lanes run 0, 4, 8, ...
// SHIFTS-LABEL: func @turbo3
// SHIFTS-NOT: tq.select_bits
// SHIFTS: vector.shuffle %{{.*}} [0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60, 1, 5, 9,
// SHIFTS: scf.for %{{.*}} step %c16
// The 1-bit plane's bytes of the piece (its read's lower 8) spread to
// nibbles: lane byte 2m its byte m, 2m + 1 that byte shifted down by 4,
// so bit f of lane byte i is value 4i + f's; vectors 0 and 1 take those
// bits two higher.
// SHIFTS: vector.transfer_read %{{.*}}%c34{{.*}} : tensor<?x?x1x50xi8>, vector<16xi8>
// SHIFTS: %[[NIB:.*]] = arith.shrui %{{.*}}, %{{.*}} : vector<32xi16>
// SHIFTS: vector.shuffle %{{.*}}, %{{.*}} [0, 64, 1, 65, 2, 66, 3, 67, 4, 68, 5, 69, 6, 70, 7, 71, 16, 80,
// SHIFTS: arith.shli %{{.*}}, %{{.*}} : vector<32xi16>
// Field 0 unshifted, its high bit at bit 2; field 1 shifted down by 2,
// its high bit at bit 3 (the second table); then fields 2 (by 4) and 3
// (by 6).
// SHIFTS: tq.byte_lookup %{{.*}} [1, 50, 84, 114, -114, -84, -50, -1, 1, 50, 84, 114, -114, -84, -50, -1]
// SHIFTS: arith.shrui %{{.*}}, %{{.*}} : vector<32xi16>
// SHIFTS: tq.byte_lookup %{{.*}} [1, 50, 84, 114, 1, 50, 84, 114, -114, -84, -50, -1, -114, -84, -50, -1]
// SHIFTS-COUNT-2: tq.byte_dot
// The second piece: the same read's upper 8 bytes.
// SHIFTS: vector.shuffle %{{.*}}, %{{.*}} [8, 72, 9, 73, 10, 74, 11, 75, 12, 76, 13, 77, 14, 78, 15, 79, 24, 88,
func.func @turbo3(%q: tensor<1x2x128xf32>, %kb: tensor<5x1x50xi8>) -> tensor<1x2x5xf32> {
  %k = tq.from_bytes %kb : tensor<5x1x50xi8> -> !tq.cache<5x1x128, #tq.format<"turbo3_0">>
  %s = tq.score %q, %k {lookup = #tq.lookup<tile>} : tensor<1x2x128xf32>, !tq.cache<5x1x128, #tq.format<"turbo3_0">> -> tensor<1x2x5xf32>
  return %s : tensor<1x2x5xf32>
}

// -----

// polar4: one plane of nibbles, 16 values per 8 bytes: pieces of 32
// values, two level vectors each, no bit select.
// CHECK-LABEL: func @polar4
// CHECK: tq.select_bits %{{.*}} [0, 4, 8, 12, 16, 20, 24, 28, 0, 4,
// CHECK-NOT: arith.ori
// CHECK: tq.byte_lookup
// CHECK: tq.byte_dot
// score-lanes=shifts: a piece of 32 values (16 bytes), the low nibbles
// as they are and the high ones shifted down by 4.
// SHIFTS-LABEL: func @polar4
// SHIFTS-NOT: tq.select_bits
// SHIFTS: vector.shuffle %{{.*}} [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 1, 3, 5,
// SHIFTS-NOT: arith.ori
// SHIFTS: tq.byte_lookup
// SHIFTS: arith.shrui %{{.*}}, %{{.*}} : vector<32xi16>
// SHIFTS: tq.byte_lookup
func.func @polar4(%q: tensor<1x2x128xf32>, %kb: tensor<5x1x66xi8>) -> tensor<1x2x5xf32> {
  %k = tq.from_bytes %kb : tensor<5x1x66xi8> -> !tq.cache<5x1x128, #tq.format<"polar4">>
  %s = tq.score %q, %k {lookup = #tq.lookup<tile>} : tensor<1x2x128xf32>, !tq.cache<5x1x128, #tq.format<"polar4">> -> tensor<1x2x5xf32>
  return %s : tensor<1x2x5xf32>
}

// -----

// tq3_0: 32-value blocks of a 2-bit plane (bytes 0..7), a 1-bit plane
// (8..11) and an fp16 scale (12..13). A piece is one run of the block's
// 32 values, a lane's halves 8 values apart in the same 8 bytes; one
// 16-byte read per token holds both planes (the two reads are the same,
// merged by CSE) and the block's scale, which the step takes from the
// joined reads (16 halves, one widening) instead of a load per token.
// One query row by row lanes keeps the f32 score (32-value blocks ran
// slower than f32 there).
// CHECK-LABEL: func @tq3
// CHECK: vector.transfer_read %{{.*}}%c0{{.*}} : tensor<?x?x1x56xi8>, vector<16xi8>
// CHECK: tq.select_bits %{{.*}} [0, 2, 4, 6, 8, 10, 12, 14, 0, 2, 4, 6, 8, 10, 12, 14,
// CHECK: tq.select_bits %{{.*}} [62, 63, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13,
// CHECK-COUNT-2: tq.byte_dot
// CHECK: vector.bitcast %{{.*}} : vector<32xi8> to vector<16xf16>
// CHECK: arith.extf %{{.*}} : vector<16xf16> to vector<16xf32>
// ROWS-LABEL: func @tq3
// ROWS-NOT: tq.byte_dot
// ROWS: vector.fma
// score-lanes=blocks: four blocks (a quad, 56 bytes) per token read as 64
// bytes, masked past the row's end (no in_bounds). Per pair of tokens a
// two-source byte shuffle gives both tokens' chunks 0 and 1 (values 0-7
// and 8-15 of each block): lane 0 is token a's chunk 0, its low half
// blocks 0 and 1's 2-bit bytes and 1-bit byte (0, 1, 8 and 14, 15, 22)
// and block 0's scale (12, 13), its high half blocks 2 and 3's and block
// 1's scale (26, 27). Lanes of two pairs make four tokens' chunk.
// BLOCKS-LABEL: func @tq3
// BLOCKS: %[[A:.*]] = vector.transfer_read {{[^{]*}} : tensor<?x?x1x56xi8>, vector<64xi8>
// BLOCKS: %[[B:.*]] = vector.transfer_read {{[^{]*}} : tensor<?x?x1x56xi8>, vector<64xi8>
// BLOCKS: vector.shuffle %[[A]], %[[B]] [0, 1, 8, 14, 15, 22, 12, 13, 28, 29, 36, 42, 43, 50, 26, 27, 64, 65, 72,
// BLOCKS: vector.shuffle %{{.*}}, %{{.*}} [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 64,
// Level vector 0: values 0-3 of blocks 0 and 1 (32-bit lanes 0, 1: low
// bits from bytes 0 and 3 of the half, high bits from bytes 2 and 5).
// BLOCKS: tq.select_bits %{{.*}} [0, 2, 4, 6, 24, 26, 28, 30, 0, 2, 4, 6, 24, 26, 28, 30,
// BLOCKS: tq.select_bits %{{.*}} [14, 15, 16, 17, 38, 39, 40, 41, 14, 15,
// BLOCKS-COUNT-2: tq.byte_dot
// The group's 16 scales: words 3 and 7 of each lane of chunks 0 and 1.
// BLOCKS: vector.shuffle %{{.*}}, %{{.*}} [3, 7, 35, 39, 11, 15, 43, 47, 19, 23, 51, 55, 27, 31, 59, 63] : vector<32xi16>, vector<32xi16>
// BLOCKS: arith.extf %{{.*}} : vector<16xf16> to vector<16xf32>
// One transpose per head of the four groups' scaled sums (not one per
// block and head), then the blocks added in order.
// BLOCKS-COUNT-3: arith.addf %{{.*}} : vector<16xf32>
// BLOCKS: vector.transfer_write
// score-lanes=shifts: the block lanes with shifted fields. One permute
// per pair of tokens lays out each token's 2-bit halves (block j's bytes
// 0-3 in lane 0's 32-bit lane j, bytes 4-7 in lane 2's), one more the
// 1-bit bytes (block j's 0, 1 at bytes 2j, 2j + 1, its 2, 3 eight on)
// and the four scales (lane 3's bytes 0-7); per half the 1-bit bytes
// spread to nibbles as turbo3's (the lanes' lower 8 bytes for half 0),
// then four level vectors by shifts of 0, 2, 4 and 6.
// SHIFTS-LABEL: func @tq3
// SHIFTS-NOT: tq.select_bits
// SHIFTS: vector.shuffle %{{.*}}, %{{.*}} [0, 1, 2, 3, 14, 15, 16, 17, 28, 29, 30, 31, 42, 43, 44, 45, 64, 65, 66, 67, 78,
// SHIFTS: vector.shuffle %{{.*}}, %{{.*}} [8, 9, 22, 23, 36, 37, 50, 51, 10, 11, 24, 25, 38, 39, 52, 53, 72,
// SHIFTS: arith.shrui %{{.*}}, %{{.*}} : vector<32xi16>
// SHIFTS: vector.shuffle %{{.*}}, %{{.*}} [0, 64, 1, 65, 2, 66, 3, 67, 4, 68, 5, 69, 6, 70, 7, 71, 16, 80,
// SHIFTS: arith.shli %{{.*}}, %{{.*}} : vector<32xi16>
// SHIFTS: arith.shrui %{{.*}}, %{{.*}} : vector<32xi16>
// SHIFTS-COUNT-2: tq.byte_dot
// SHIFTS: arith.extf %{{.*}} : vector<16xf16> to vector<16xf32>
func.func @tq3(%q: tensor<1x2x128xf32>, %kb: tensor<5x1x56xi8>) -> tensor<1x2x5xf32> {
  %k = tq.from_bytes %kb : tensor<5x1x56xi8> -> !tq.cache<5x1x128, #tq.format<"tq3_0">>
  %s = tq.score %q, %k {lookup = #tq.lookup<tile>} : tensor<1x2x128xf32>, !tq.cache<5x1x128, #tq.format<"tq3_0">> -> tensor<1x2x5xf32>
  return %s : tensor<1x2x5xf32>
}

// -----

// Several query rows (prefill) keep the row lanes: each row's levels are
// decoded once for all query rows, which a token's lanes cannot share.
// CHECK-LABEL: func @two_query_rows
// CHECK-NOT: tq.select_bits
// CHECK: tq.byte_dot
func.func @two_query_rows(%q: tensor<2x2x128xf32>, %kb: tensor<5x1x50xi8>) -> tensor<2x2x5xf32> {
  %k = tq.from_bytes %kb : tensor<5x1x50xi8> -> !tq.cache<5x1x128, #tq.format<"turbo3_0">>
  %s = tq.score %q, %k {lookup = #tq.lookup<tile>} : tensor<2x2x128xf32>, !tq.cache<5x1x128, #tq.format<"turbo3_0">> -> tensor<2x2x5xf32>
  return %s : tensor<2x2x5xf32>
}

// -----

// q8_0 has no codebook: no int8 levels at all, the f32 score stays.
// CHECK-LABEL: func @no_codes
// CHECK-NOT: tq.select_bits
// CHECK-NOT: tq.byte_dot
func.func @no_codes(%q: tensor<1x2x128xf32>, %kb: tensor<5x1x136xi8>) -> tensor<1x2x5xf32> {
  %k = tq.from_bytes %kb : tensor<5x1x136xi8> -> !tq.cache<5x1x128, #tq.format<"q8_0">>
  %s = tq.score %q, %k {lookup = #tq.lookup<tile>} : tensor<1x2x128xf32>, !tq.cache<5x1x128, #tq.format<"q8_0">> -> tensor<1x2x5xf32>
  return %s : tensor<1x2x5xf32>
}
