// tq-lower-to-loops{select-fields=true}: the integer paths' index decode
// (VectorRowDecoder::decodeCodes) gathers each index plane's fields with
// tq.select_bits from 8-byte windows of the row (one per 64-bit lane of
// the result, inside the row) and joins two planes with a bit select:
// bits below the second plane's from the first, the rest from the
// second. Bits above the index are left as they come (the byte and word
// lookups read an index mod the table's 2^bits entries). Without the
// option the planes are shifted, masked and or-ed, and no field is
// selected.

// RUN: tq-opt %s -split-input-file --tq-lower-to-loops="score-dot=i8 value-dot=i16 select-fields=true" | FileCheck %s
// RUN: tq-opt %s -split-input-file --tq-lower-to-loops="score-dot=i8 value-dot=i16" | FileCheck %s --check-prefix=SHIFTS

// turbo3_0 at 128, rows of 50 bytes: the 2-bit plane at bytes 2..33, the
// 1-bit plane at 34..49. A 64-lane chunk holds value k (k = 0, 1) of the
// 2-bit plane's 32 bytes (lane order), so its 64-bit lanes read the
// plane's 8-byte runs, each twice: one 32-byte read, broadcast. Value 4b
// + k's high bit is bit 4b + k of the 1-bit plane: lanes 0-7 (bytes 0-7,
// values 0, 4, ..., 28) need sign bytes 0-3, lanes 8-15 bytes 4-7, lanes
// 16-31 bytes 8-15: windows start at whole 8-byte steps of the read where
// the fields fit (a permute of 64-bit lanes, not of words), so lanes 0-15
// read bytes 0-7 and lanes 16-31 bytes 8-15, lanes 8-15 at bit offsets 32
// higher. Value 0's high bit (bit 0) goes to index bit 2: offset 62.
// CHECK-LABEL: func @turbo3_score
// CHECK: %[[Q:.*]] = vector.transfer_read %{{.*}}%c2{{.*}} : tensor<?x?x1x50xi8>, vector<32xi8>
// CHECK: %[[QQ:.*]] = vector.shuffle %[[Q]], %[[Q]] [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, {{.*}}, 30, 31, 0, 1, 2, 3,
// CHECK: %[[LOW:.*]] = tq.select_bits %[[QQ]] [0, 8, 16, 24, 32, 40, 48, 56, 0, 8, 16, 24, 32, 40, 48, 56, 0, 8, 16, 24, 32, 40, 48, 56, 0, 8, 16, 24, 32, 40, 48, 56, 2, 10, 18,
// CHECK: %[[S:.*]] = vector.transfer_read %{{.*}}%c34{{.*}} : tensor<?x?x1x50xi8>, vector<16xi8>
// CHECK: %[[SS:.*]] = vector.shuffle %[[S]], %[[S]] [0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1,
// CHECK: %[[HIGH:.*]] = tq.select_bits %[[SS]] [62, 2, 6, 10, 14, 18, 22, 26, 30, 34, 38, 42, 46, 50, 54, 58, 62, 2, 6, 10, 14, 18, 22, 26, 30, 34, 38, 42, 46, 50, 54, 58, 63, 3,
// CHECK: %[[L:.*]] = arith.andi %[[LOW]], %{{.*}} : vector<64xi8>
// CHECK: %[[H:.*]] = arith.andi %[[HIGH]], %{{.*}} : vector<64xi8>
// CHECK: %[[I:.*]] = arith.ori %[[L]], %[[H]] : vector<64xi8>
// CHECK: tq.byte_lookup %[[I]] [1, 50, 84, 114, -114, -84, -50, -1] : vector<64xi8>
// SHIFTS-LABEL: func @turbo3_score
// SHIFTS-NOT: tq.select_bits
// SHIFTS: arith.shrui
// SHIFTS: tq.byte_lookup
func.func @turbo3_score(%q: tensor<1x2x128xf32>, %kb: tensor<5x1x50xi8>) -> tensor<1x2x5xf32> {
  %k = tq.from_bytes %kb : tensor<5x1x50xi8> -> !tq.cache<5x1x128, #tq.format<"turbo3_0">>
  %s = tq.score %q, %k {lookup = #tq.lookup<tile>} : tensor<1x2x128xf32>, !tq.cache<5x1x128, #tq.format<"turbo3_0">> -> tensor<1x2x5xf32>
  return %s : tensor<1x2x5xf32>
}

// -----

// The masks of the bit select: bits 0-1 from the 2-bit plane, bits 2-7
// from the 1-bit plane (-4 = 0xfc).
// CHECK-LABEL: func @turbo3_masks
// CHECK-DAG: arith.constant dense<3> : vector<64xi8>
// CHECK-DAG: arith.constant dense<-4> : vector<64xi8>
// CHECK: tq.byte_lookup
func.func @turbo3_masks(%q: tensor<1x2x128xf32>, %kb: tensor<5x1x50xi8>) -> tensor<1x2x5xf32> {
  %k = tq.from_bytes %kb : tensor<5x1x50xi8> -> !tq.cache<5x1x128, #tq.format<"turbo3_0">>
  %s = tq.score %q, %k {lookup = #tq.lookup<tile>} : tensor<1x2x128xf32>, !tq.cache<5x1x128, #tq.format<"turbo3_0">> -> tensor<1x2x5xf32>
  return %s : tensor<1x2x5xf32>
}

// -----

// The pair weighted sum decodes its rows the same way before the two
// rows' index bytes are interleaved and widened to words, in the row's
// order (VectorRowDecoder::getForScaledCodes with select-fields): a
// chunk's 64 values (0-63 first) have their high bits in the 1-bit
// plane's first 8 bytes, so every 64-bit lane reads those: one 8-byte
// read broadcast (vpbroadcastq, no permute), value 0's bit at offset 62.
// Their low bits, 16 bytes of the 2-bit plane, spread by 64-bit lanes:
// lanes 0-31 read bytes 0-7, lanes 32-63 bytes 8-15.
// CHECK-LABEL: func @turbo3_pairs
// CHECK: vector.shuffle %{{.*}}, %{{.*}} [0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9,
// CHECK: tq.select_bits %{{.*}} [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20,
// CHECK: %[[S8:.*]] = vector.transfer_read %{{.*}}%c34{{.*}} : tensor<?x?x1x50xi8>, vector<8xi8>
// CHECK: %[[W:.*]] = vector.bitcast %[[S8]] : vector<8xi8> to vector<1xi64>
// CHECK: %[[W0:.*]] = vector.extract %[[W]][0] : i64 from vector<1xi64>
// CHECK: %[[WS:.*]] = vector.broadcast %[[W0]] : i64 to vector<8xi64>
// CHECK: %[[SB:.*]] = vector.bitcast %[[WS]] : vector<8xi64> to vector<64xi8>
// CHECK: tq.select_bits %[[SB]] [62, 63, 0, 1, 2, 3, 4, 5, 6, 7, 8,
// CHECK: arith.ori
// CHECK: vector.shuffle %{{.*}}, %{{.*}} [0, 64, 1, 65,
// CHECK: tq.word_lookup
// CHECK: tq.pair_dot
// SHIFTS-LABEL: func @turbo3_pairs
// SHIFTS-NOT: tq.select_bits
// SHIFTS: tq.pair_dot
func.func @turbo3_pairs(%p: tensor<1x2x5xf32>, %vb: tensor<5x1x50xi8>) -> tensor<1x2x128xf32> {
  %v = tq.from_bytes %vb : tensor<5x1x50xi8> -> !tq.cache<5x1x128, #tq.format<"turbo3_0">>
  %a = tq.accumulate %p, %v {lookup = #tq.lookup<tile>} : tensor<1x2x5xf32>, !tq.cache<5x1x128, #tq.format<"turbo3_0">> -> tensor<1x2x128xf32>
  return %a : tensor<1x2x128xf32>
}

// -----

// polar4: one plane of nibbles; the select alone, no bit select.
// CHECK-LABEL: func @polar4_score
// CHECK: tq.select_bits
// CHECK-NOT: arith.ori
// CHECK: tq.byte_lookup
// SHIFTS-LABEL: func @polar4_score
// SHIFTS-NOT: tq.select_bits
func.func @polar4_score(%q: tensor<1x2x128xf32>, %kb: tensor<5x1x66xi8>) -> tensor<1x2x5xf32> {
  %k = tq.from_bytes %kb : tensor<5x1x66xi8> -> !tq.cache<5x1x128, #tq.format<"polar4">>
  %s = tq.score %q, %k {lookup = #tq.lookup<tile>} : tensor<1x2x128xf32>, !tq.cache<5x1x128, #tq.format<"polar4">> -> tensor<1x2x5xf32>
  return %s : tensor<1x2x5xf32>
}

// -----

// polar4's pair weighted sum keeps the widest plane's order: there a
// chunk (value k of each of the plane's 64 bytes) is one 64-byte read in
// lane order, no permute, where the row's order would need one per chunk
// (VectorRowDecoder::selectPermutes: 0 against 2).
// CHECK-LABEL: func @polar4_pairs
// CHECK: %[[R0:.*]] = vector.transfer_read %{{.*}}%c2{{.*}} : tensor<?x?x1x66xi8>, vector<64xi8>
// CHECK-NEXT: tq.select_bits %[[R0]] [0, 8, 16, 24, 32, 40, 48, 56, 0, 8,
// CHECK: %[[B0:.*]] = vector.transfer_read %{{.*}}%c2{{.*}} : tensor<?x?x1x66xi8>, vector<64xi8>
// CHECK-NEXT: tq.select_bits %[[B0]] [0, 8, 16, 24, 32, 40, 48, 56, 0, 8,
// CHECK: %[[R1:.*]] = vector.transfer_read %{{.*}}%c2{{.*}} : tensor<?x?x1x66xi8>, vector<64xi8>
// CHECK-NEXT: tq.select_bits %[[R1]] [4, 12, 20, 28, 36, 44, 52, 60, 4, 12,
// CHECK: tq.pair_dot
func.func @polar4_pairs(%p: tensor<1x2x5xf32>, %vb: tensor<5x1x66xi8>) -> tensor<1x2x128xf32> {
  %v = tq.from_bytes %vb : tensor<5x1x66xi8> -> !tq.cache<5x1x128, #tq.format<"polar4">>
  %a = tq.accumulate %p, %v {lookup = #tq.lookup<tile>} : tensor<1x2x5xf32>, !tq.cache<5x1x128, #tq.format<"polar4">> -> tensor<1x2x128xf32>
  return %a : tensor<1x2x128xf32>
}
