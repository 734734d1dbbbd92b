// tq-lower-lane-lookup on the int8 score's byte ops: with isa=avx512vnni
// one vpshufb per 64 lanes and one vpdpbusd per 16 (8, 4) i32 lanes; with
// isa=avx2 (and avx512 without VNNI) one 256-bit vpshufb per 32 lanes and,
// for a `narrow` byte_dot only, vpmaddubsw + vpmaddwd against ones per 8
// i32 lanes; otherwise the portable form (a select tree on bytes;
// widening multiplies and four strided shuffles summed per lane).

// RUN: tq-opt %s -split-input-file --tq-lower-lane-lookup=isa=avx512vnni | FileCheck %s --check-prefix=VNNI
// RUN: tq-opt %s -split-input-file --tq-lower-lane-lookup=isa=avx2 | FileCheck %s --check-prefix=AVX2
// RUN: tq-opt %s -split-input-file --tq-lower-lane-lookup=isa=avx512 | FileCheck %s --check-prefix=AVX2
// RUN: tq-opt %s -split-input-file --tq-lower-lane-lookup=isa=avxvnni | FileCheck %s --check-prefix=AVXVNNI
// RUN: tq-opt %s -split-input-file --tq-lower-lane-lookup | FileCheck %s --check-prefix=PORTABLE

// The table repeats to 16 bytes per 128-bit lane; the index is masked to
// its low 4 bits (vpshufb zeroes lanes whose bit 7 is set).
// VNNI-LABEL: func @lookup_and_dot
// VNNI: %[[T:.*]] = arith.constant dense<[1, 64, -64, -1, 1, 64, -64, -1,
// VNNI: %[[M:.*]] = arith.constant dense<15> : vector<64xi8>
// VNNI: %[[LOW:.*]] = arith.andi %arg1, %[[M]]
// VNNI: %[[L:.*]] = llvm.call_intrinsic "llvm.x86.avx512.pshuf.b.512"(%[[T]], %[[LOW]]) : (vector<64xi8>, vector<64xi8>) -> vector<64xi8>
// VNNI: %[[D:.*]] = llvm.call_intrinsic "llvm.x86.avx512.vpdpbusd.512"(%arg0, %[[L]], %arg2) : (vector<16xi32>, vector<64xi8>, vector<64xi8>) -> vector<16xi32>
// VNNI: return %[[D]]
// Without `narrow` a byte of lhs may reach 255, where vpmaddubsw's pair
// sums would saturate: AVX2 keeps the portable products.
// AVX2-LABEL: func @lookup_and_dot
// AVX2: %[[T:.*]] = arith.constant dense<[1, 64, -64, -1, 1, 64, -64, -1,
// AVX2-SAME: vector<32xi8>
// AVX2: arith.andi %arg1
// AVX2-COUNT-2: llvm.call_intrinsic "llvm.x86.avx2.pshuf.b"(%[[T]], %{{.*}}) : (vector<32xi8>, vector<32xi8>) -> vector<32xi8>
// AVX2-NOT: pmadd
// AVX2: arith.extui %{{.*}} : vector<64xi8> to vector<64xi32>
// AVX-VNNI: the 256-bit vpshufb, and a VEX vpdpbusd per 8 i32 lanes
// (exact for any byte: no `narrow` needed).
// AVXVNNI-LABEL: func @lookup_and_dot
// AVXVNNI-COUNT-2: llvm.call_intrinsic "llvm.x86.avx2.pshuf.b"
// AVXVNNI-COUNT-2: llvm.call_intrinsic "llvm.x86.avx512.vpdpbusd.256"({{.*}}) : (vector<8xi32>, vector<32xi8>, vector<32xi8>) -> vector<8xi32>
// AVXVNNI-NOT: pmadd
// PORTABLE-LABEL: func @lookup_and_dot
// PORTABLE-NOT: llvm.call_intrinsic
// PORTABLE-COUNT-3: arith.select
// PORTABLE: arith.extui %{{.*}} : vector<64xi8> to vector<64xi32>
// PORTABLE: arith.extsi %arg2 : vector<64xi8> to vector<64xi32>
// PORTABLE: %[[P:.*]] = arith.muli
// PORTABLE: vector.shuffle %[[P]], %[[P]] [0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60]
// PORTABLE: vector.shuffle %[[P]], %[[P]] [1, 5,
// PORTABLE: vector.shuffle %[[P]], %[[P]] [2, 6,
// PORTABLE: vector.shuffle %[[P]], %[[P]] [3, 7,
// PORTABLE-NOT: vector.multi_reduction
func.func @lookup_and_dot(%acc: vector<16xi32>, %idx: vector<64xi8>, %q: vector<64xi8>) -> vector<16xi32> {
  %l = tq.byte_lookup %idx [1, 64, -64, -1] : vector<64xi8>
  %d = tq.byte_dot %acc, %l, %q : vector<64xi8> -> vector<16xi32>
  return %d : vector<16xi32>
}

// -----

// 128 bytes: two of each, concatenated; 32 bytes: the 256-bit vpdpbusd,
// and (not a multiple of 64 lanes) the lookup's select tree.
// VNNI-LABEL: func @widths
// VNNI-COUNT-2: llvm.call_intrinsic "llvm.x86.avx512.pshuf.b.512"
// VNNI-COUNT-2: llvm.call_intrinsic "llvm.x86.avx512.vpdpbusd.512"
// VNNI: vector.shuffle {{.*}} : vector<16xi32>, vector<16xi32>
// VNNI: arith.select
// VNNI: llvm.call_intrinsic "llvm.x86.avx512.vpdpbusd.256"({{.*}}) : (vector<8xi32>, vector<32xi8>, vector<32xi8>) -> vector<8xi32>
func.func @widths(%acc: vector<32xi32>, %idx: vector<128xi8>, %q: vector<128xi8>,
                  %acc8: vector<8xi32>, %idx8: vector<32xi8>, %q8: vector<32xi8>) -> (vector<32xi32>, vector<8xi32>) {
  %l = tq.byte_lookup %idx [1, 2] : vector<128xi8>
  %d = tq.byte_dot %acc, %l, %q : vector<128xi8> -> vector<32xi32>
  %l8 = tq.byte_lookup %idx8 [1, 2] : vector<32xi8>
  %d8 = tq.byte_dot %acc8, %l8, %q8 : vector<32xi8> -> vector<8xi32>
  return %d, %d8 : vector<32xi32>, vector<8xi32>
}

// -----

// `narrow` (lhs bytes below 128): vpdpbusd with VNNI as before; with AVX2
// per 8 i32 lanes vpmaddubsw (unsigned lhs first) then vpmaddwd against
// ones, added to that part of the accumulator.
// VNNI-LABEL: func @narrow_dot
// VNNI: llvm.call_intrinsic "llvm.x86.avx512.vpdpbusd.512"(%arg0, %arg1, %arg2)
// AVX2-LABEL: func @narrow_dot
// AVX2-DAG: %[[ONES:.*]] = arith.constant dense<1> : vector<16xi16>
// AVX2-DAG: %[[L0:.*]] = vector.extract_strided_slice %arg1 {offsets = [0], sizes = [32], strides = [1]}
// AVX2-DAG: %[[R0:.*]] = vector.extract_strided_slice %arg2 {offsets = [0], sizes = [32], strides = [1]}
// AVX2-DAG: %[[A0:.*]] = vector.extract_strided_slice %arg0 {offsets = [0], sizes = [8], strides = [1]}
// AVX2: %[[P:.*]] = llvm.call_intrinsic "llvm.x86.avx2.pmadd.ub.sw"(%[[L0]], %[[R0]]) : (vector<32xi8>, vector<32xi8>) -> vector<16xi16>
// AVX2: %[[S:.*]] = llvm.call_intrinsic "llvm.x86.avx2.pmadd.wd"(%[[P]], %[[ONES]]) : (vector<16xi16>, vector<16xi16>) -> vector<8xi32>
// AVX2: arith.addi %[[A0]], %[[S]] : vector<8xi32>
// AVX2-COUNT-1: llvm.x86.avx2.pmadd.ub.sw
// AVX2: vector.shuffle {{.*}} : vector<8xi32>, vector<8xi32>
// AVXVNNI-LABEL: func @narrow_dot
// AVXVNNI-COUNT-2: llvm.call_intrinsic "llvm.x86.avx512.vpdpbusd.256"
// AVXVNNI-NOT: pmadd
// PORTABLE-LABEL: func @narrow_dot
// PORTABLE-NOT: llvm.call_intrinsic
// PORTABLE: arith.extui %arg1 : vector<64xi8> to vector<64xi32>
func.func @narrow_dot(%acc: vector<16xi32>, %l: vector<64xi8>, %q: vector<64xi8>) -> vector<16xi32> {
  %d = tq.byte_dot %acc, %l, %q {narrow} : vector<64xi8> -> vector<16xi32>
  return %d : vector<16xi32>
}

// -----

// 4 lanes (16 bytes) do not fill a vpmaddubsw: portable even when narrow.
// AVX2-LABEL: func @narrow_too_short
// AVX2-NOT: llvm.call_intrinsic
// AVX2: arith.extui
func.func @narrow_too_short(%acc: vector<4xi32>, %l: vector<16xi8>, %q: vector<16xi8>) -> vector<4xi32> {
  %d = tq.byte_dot %acc, %l, %q {narrow} : vector<16xi8> -> vector<4xi32>
  return %d : vector<4xi32>
}
