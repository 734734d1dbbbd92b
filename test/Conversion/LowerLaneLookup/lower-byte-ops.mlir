// tq-lower-lane-lookup on the int8 score's byte ops: with isa=avx512vnni
// one vpshufb per 64 lanes and one vpdpbusd per 16 (8, 4) i32 lanes; with
// any other isa the portable form (a select tree on bytes; widening
// multiplies and four strided shuffles summed per lane).

// RUN: tq-opt %s -split-input-file --tq-lower-lane-lookup=isa=avx512vnni | FileCheck %s --check-prefix=VNNI
// RUN: tq-opt %s -split-input-file --tq-lower-lane-lookup=isa=avx512 | FileCheck %s --check-prefix=PORTABLE
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
