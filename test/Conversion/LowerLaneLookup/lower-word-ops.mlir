// tq-lower-lane-lookup on the pair weighted sum's word ops: with
// isa=avx512vnni one vpermw per 32 words and one vpdpwssd per 16 i32
// lanes; bf16 pair products need isa=avx512bf16 (x86vector.avx512.dot,
// vdpbf16ps). With isa=avx2 (and avx512 without VNNI) a table of up to
// 16 words is looked up by 256-bit vpshufb on its bytes per 16 lanes, and
// an i16 pair_dot is vpmaddwd and an add per 8 lanes; words looked up from
// bytes widened with zeros become two byte lookups there, and with
// AVX-512 too (a vpshufb or vpermb is one uop, a vpermw two on Intel's
// cores). isa=none gets the
// portable form: a select tree on words; widening to the accumulator's
// type, a multiply and the sum of each pair.

// RUN: tq-opt %s -split-input-file --tq-lower-lane-lookup=isa=avx512bf16 | FileCheck %s --check-prefix=BF16
// RUN: tq-opt %s -split-input-file --tq-lower-lane-lookup=isa=avx512vnni | FileCheck %s --check-prefix=VNNI
// RUN: tq-opt %s -split-input-file --tq-lower-lane-lookup="isa=avx512vnni vbmi=true" | FileCheck %s --check-prefix=VBMI
// RUN: tq-opt %s -split-input-file --tq-lower-lane-lookup=isa=avx2 | FileCheck %s --check-prefix=AVX2
// RUN: tq-opt %s -split-input-file --tq-lower-lane-lookup=isa=avx512 | FileCheck %s --check-prefix=AVX2
// RUN: tq-opt %s -split-input-file --tq-lower-lane-lookup=isa=avxvnni | FileCheck %s --check-prefix=AVXVNNI
// RUN: tq-opt %s -split-input-file --tq-lower-lane-lookup=isa=none | FileCheck %s --check-prefix=PORTABLE

// The table repeats to 32 words (vpermw reads five index bits).
// VNNI-LABEL: func @int16_pairs
// VNNI: %[[T:.*]] = arith.constant dense<[-511, -40, 40, 511, -511, -40, 40, 511,
// VNNI: %[[L:.*]] = llvm.call_intrinsic "llvm.x86.avx512.permvar.hi.512"(%[[T]], %arg1) : (vector<32xi16>, vector<32xi16>) -> vector<32xi16>
// VNNI: %[[D:.*]] = llvm.call_intrinsic "llvm.x86.avx512.vpdpwssd.512"(%arg0, %[[L]], %arg2) : (vector<16xi32>, vector<32xi16>, vector<32xi16>) -> vector<16xi32>
// VNNI: return %[[D]]
// BF16-LABEL: func @int16_pairs
// BF16: llvm.x86.avx512.permvar.hi.512
// BF16: llvm.x86.avx512.vpdpwssd.512
// Word w reads bytes 2(w mod 8) and 2(w mod 8) + 1: lane index
// (w & 7) * 0x202 + 0x100, the 4-word table repeated to 8 words (16
// bytes, little-endian) in each 128-bit lane.
// AVX2-LABEL: func @int16_pairs
// AVX2-DAG: %[[SEVEN:.*]] = arith.constant dense<7> : vector<32xi16>
// AVX2-DAG: %[[MUL:.*]] = arith.constant dense<514> : vector<32xi16>
// AVX2-DAG: %[[ADD:.*]] = arith.constant dense<256> : vector<32xi16>
// AVX2-DAG: %[[T:.*]] = arith.constant dense<[1, -2, -40, -1, 40, 0, -1, 1, 1, -2, -40, -1, 40, 0, -1, 1, 1, -2,
// AVX2: %[[LOW:.*]] = arith.andi %arg1, %[[SEVEN]]
// AVX2: %[[M:.*]] = arith.muli %[[LOW]], %[[MUL]]
// AVX2: %[[I:.*]] = arith.addi %[[M]], %[[ADD]]
// AVX2: %[[B:.*]] = vector.bitcast %[[I]] : vector<32xi16> to vector<64xi8>
// AVX2-COUNT-2: llvm.call_intrinsic "llvm.x86.avx2.pshuf.b"(%[[T]], %{{.*}}) : (vector<32xi8>, vector<32xi8>) -> vector<32xi8>
// AVX2: vector.bitcast %{{.*}} : vector<64xi8> to vector<32xi16>
// AVX2-COUNT-2: llvm.call_intrinsic "llvm.x86.avx2.pmadd.wd"({{.*}}) : (vector<16xi16>, vector<16xi16>) -> vector<8xi32>
// AVX2-NOT: llvm.call_intrinsic
// AVX-VNNI: the same byte lookups, and a VEX vpdpwssd per 8 lanes.
// AVXVNNI-LABEL: func @int16_pairs
// AVXVNNI-COUNT-2: llvm.call_intrinsic "llvm.x86.avx2.pshuf.b"
// AVXVNNI-COUNT-2: llvm.call_intrinsic "llvm.x86.avx512.vpdpwssd.256"({{.*}}) : (vector<8xi32>, vector<16xi16>, vector<16xi16>) -> vector<8xi32>
// AVXVNNI-NOT: pmadd
// PORTABLE-LABEL: func @int16_pairs
// PORTABLE-NOT: llvm.call_intrinsic
// PORTABLE-COUNT-3: arith.select
// PORTABLE: arith.extsi %{{.*}} : vector<32xi16> to vector<32xi32>
// PORTABLE: %[[P:.*]] = arith.muli
// PORTABLE: %[[E:.*]] = vector.shuffle %[[P]], %[[P]] [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30]
// PORTABLE: %[[O:.*]] = vector.shuffle %[[P]], %[[P]] [1, 3, 5,
// PORTABLE: %[[S:.*]] = arith.addi %[[E]], %[[O]]
// PORTABLE: arith.addi %arg0, %[[S]]
func.func @int16_pairs(%acc: vector<16xi32>, %idx: vector<32xi16>, %w: vector<32xi16>) -> vector<16xi32> {
  %l = tq.word_lookup %idx [-511, -40, 40, 511] : vector<32xi16>
  %d = tq.pair_dot %acc, %l, %w : vector<32xi16> -> vector<16xi32>
  return %d : vector<16xi32>
}

// -----

// bf16 pairs: vdpbf16ps only with avx512bf16; VNNI alone has no bf16
// products, so they stay portable there (extf to f32, mulf, the pair sum).
// BF16-LABEL: func @bf16_pairs
// BF16: x86vector.avx512.dot %arg0, %arg1, %arg2 : vector<32xbf16> -> vector<16xf32>
// BF16: x86vector.avx512.dot {{.*}} : vector<16xbf16> -> vector<8xf32>
// AVX2-LABEL: func @bf16_pairs
// AVX2-NOT: llvm.call_intrinsic
// AVX2: arith.extf
// VNNI-LABEL: func @bf16_pairs
// VNNI-NOT: x86vector
// VNNI: arith.extf %arg1 : vector<32xbf16> to vector<32xf32>
// VNNI: arith.mulf
// VNNI: arith.addf
func.func @bf16_pairs(%acc: vector<16xf32>, %a: vector<32xbf16>, %w: vector<32xbf16>,
                      %acc8: vector<8xf32>, %a8: vector<16xbf16>) -> (vector<16xf32>, vector<8xf32>) {
  %d = tq.pair_dot %acc, %a, %w : vector<32xbf16> -> vector<16xf32>
  %d8 = tq.pair_dot %acc8, %a8, %a8 : vector<16xbf16> -> vector<8xf32>
  return %d, %d8 : vector<16xf32>, vector<8xf32>
}

// -----

// 64 words: two vpermw, concatenated; 16 words (not a multiple of 32): the
// select tree.
// VNNI-LABEL: func @word_widths
// VNNI-COUNT-2: llvm.call_intrinsic "llvm.x86.avx512.permvar.hi.512"
// VNNI: vector.shuffle {{.*}} : vector<32xi16>, vector<32xi16>
// VNNI: arith.select
func.func @word_widths(%idx: vector<64xi16>, %idx16: vector<16xi16>) -> (vector<64xi16>, vector<16xi16>) {
  %l = tq.word_lookup %idx [1, 2] : vector<64xi16>
  %l16 = tq.word_lookup %idx16 [1, 2] : vector<16xi16>
  return %l, %l16 : vector<64xi16>, vector<16xi16>
}

// -----

// A 16-word table: two lookups of 8 words each, bit 3 of the index
// picking between them; a 32-word table stays a select tree on AVX2.
// AVX2-LABEL: func @sixteen_words
// AVX2: %[[EIGHT:.*]] = arith.constant dense<8> : vector<16xi16>
// AVX2: %[[BIT:.*]] = arith.andi %arg0, %[[EIGHT]]
// AVX2: %[[HIGH:.*]] = arith.cmpi ne, %[[BIT]]
// AVX2: %[[HI:.*]] = llvm.call_intrinsic "llvm.x86.avx2.pshuf.b"
// AVX2: %[[HIW:.*]] = vector.bitcast %[[HI]]
// AVX2: %[[LO:.*]] = llvm.call_intrinsic "llvm.x86.avx2.pshuf.b"
// AVX2: %[[LOW:.*]] = vector.bitcast %[[LO]]
// AVX2: arith.select %[[HIGH]], %[[HIW]], %[[LOW]]
// AVX2-NOT: llvm.call_intrinsic
// AVX2: return
func.func @sixteen_words(%idx: vector<16xi16>, %idx32: vector<16xi16>) -> (vector<16xi16>, vector<16xi16>) {
  %l = tq.word_lookup %idx [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] : vector<16xi16>
  %l32 = tq.word_lookup %idx32 [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
                                16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31] : vector<16xi16>
  return %l, %l32 : vector<16xi16>, vector<16xi16>
}

// -----

// Words looked up from bytes widened by a shuffle with zeros (the pair
// weighted sum's indices): with AVX2 two byte lookups of the table's low
// and high bytes (one vpshufb per 32 lanes each) and the same shuffle with
// the high bytes in place of the zeros; no word lookup is left. Table
// [-511, 300, 40, 511] is 0xFE01, 0x012C, 0x0028, 0x01FF: low bytes
// [1, 44, 40, -1], high bytes [-2, 1, 0, 1]. With AVX512-VNNI one
// 512-bit vpshufb each, with AVX512-VBMI one vpermb each (no index mask).
// AVX2-LABEL: func @widened_bytes
// AVX2-DAG: %[[LT:.*]] = arith.constant dense<[1, 44, 40, -1, 1, 44, 40, -1,
// AVX2-DAG: %[[HT:.*]] = arith.constant dense<[-2, 1, 0, 1, -2, 1, 0, 1,
// AVX2-NOT: arith.muli
// AVX2-DAG: llvm.call_intrinsic "llvm.x86.avx2.pshuf.b"(%[[LT]], %{{.*}})
// AVX2-DAG: llvm.call_intrinsic "llvm.x86.avx2.pshuf.b"(%[[HT]], %{{.*}})
// AVX2: %[[W:.*]] = vector.shuffle %{{.*}}, %{{.*}} [0, 64, 1, 65, 2, 66,
// AVX2-SAME: : vector<64xi8>, vector<64xi8>
// AVX2: %[[R:.*]] = vector.bitcast %[[W]] : vector<64xi8> to vector<32xi16>
// AVX2: return %[[R]]
// AVXVNNI-LABEL: func @widened_bytes
// AVXVNNI-NOT: arith.muli
// AVXVNNI-COUNT-4: llvm.call_intrinsic "llvm.x86.avx2.pshuf.b"
// VNNI-LABEL: func @widened_bytes
// VNNI-NOT: permvar.hi
// VNNI-COUNT-2: llvm.call_intrinsic "llvm.x86.avx512.pshuf.b.512"
// VNNI: vector.shuffle %{{.*}}, %{{.*}} [0, 64, 1, 65,
// VNNI-NOT: permvar.hi
// VNNI: return
// VBMI-LABEL: func @widened_bytes
// VBMI-NOT: arith.andi
// VBMI-DAG: %[[LT:.*]] = arith.constant dense<[1, 44, 40, -1, 1, 44, 40, -1,
// VBMI-DAG: %[[HT:.*]] = arith.constant dense<[-2, 1, 0, 1, -2, 1, 0, 1,
// VBMI-DAG: llvm.call_intrinsic "llvm.x86.avx512.permvar.qi.512"(%[[LT]], %arg0)
// VBMI-DAG: llvm.call_intrinsic "llvm.x86.avx512.permvar.qi.512"(%[[HT]], %arg0)
// VBMI-NOT: permvar.hi
// VBMI: return
// PORTABLE-LABEL: func @widened_bytes
// PORTABLE-NOT: llvm.call_intrinsic
// PORTABLE: arith.select {{.*}} : vector<32xi1>, vector<32xi16>
func.func @widened_bytes(%bytes: vector<64xi8>) -> vector<32xi16> {
  %zero = arith.constant dense<0> : vector<64xi8>
  %wide = vector.shuffle %bytes, %zero [0, 64, 1, 65, 2, 66, 3, 67, 4, 68, 5, 69, 6, 70, 7, 71, 8, 72, 9, 73, 10, 74, 11, 75, 12, 76, 13, 77, 14, 78, 15, 79, 16, 80, 17, 81, 18, 82, 19, 83, 20, 84, 21, 85, 22, 86, 23, 87, 24, 88, 25, 89, 26, 90, 27, 91, 28, 92, 29, 93, 30, 94, 31, 95] : vector<64xi8>, vector<64xi8>
  %idx = vector.bitcast %wide : vector<64xi8> to vector<32xi16>
  %l = tq.word_lookup %idx [-511, 300, 40, 511] : vector<32xi16>
  return %l : vector<32xi16>
}

// -----

// Not rewritten: high bytes from another vector (the index word is not
// the byte), and a 32-word table (byte_lookup holds at most 16).
// AVX2-LABEL: func @not_widened_bytes
// AVX2: arith.muli
// AVX2: arith.select
// AVX2-NOT: arith.muli
// AVX2: return
func.func @not_widened_bytes(%bytes: vector<32xi8>, %other: vector<32xi8>) -> (vector<16xi16>, vector<16xi16>) {
  %wide = vector.shuffle %bytes, %other [0, 32, 1, 33, 2, 34, 3, 35, 4, 36, 5, 37, 6, 38, 7, 39, 8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47] : vector<32xi8>, vector<32xi8>
  %idx = vector.bitcast %wide : vector<32xi8> to vector<16xi16>
  %l = tq.word_lookup %idx [-511, 300, 40, 511] : vector<16xi16>
  %zero = arith.constant dense<0> : vector<32xi8>
  %wide32 = vector.shuffle %bytes, %zero [0, 32, 1, 33, 2, 34, 3, 35, 4, 36, 5, 37, 6, 38, 7, 39, 8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47] : vector<32xi8>, vector<32xi8>
  %idx32 = vector.bitcast %wide32 : vector<32xi8> to vector<16xi16>
  %l32 = tq.word_lookup %idx32 [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
                                16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31] : vector<16xi16>
  return %l, %l32 : vector<16xi16>, vector<16xi16>
}
