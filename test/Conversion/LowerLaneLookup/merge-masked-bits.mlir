// tq-lower-lane-lookup on a bit select written as (x & m) | (y & ~m) with
// a splat constant m (the int8 score joining two index planes): on
// AVX-512 one vpternlogd per 512 bits (imm 0xe4: m ? x : y bit by bit),
// where LLVM keeps m and ~m apart as an and and a ternlog. Elsewhere, and
// where the masks are not complements, not splats, or the vector is not
// whole 512-bit registers, the arith ops stay.

// RUN: tq-opt %s -split-input-file --tq-lower-lane-lookup=isa=avx512vnni | FileCheck %s
// RUN: tq-opt %s -split-input-file --tq-lower-lane-lookup=isa=avx512 | FileCheck %s
// RUN: tq-opt %s -split-input-file --tq-lower-lane-lookup=isa=avx2 | FileCheck %s --check-prefix=AVX2

// CHECK-LABEL: func @merge_bytes
// CHECK-DAG: %[[M:.*]] = arith.constant dense<50529027> : vector<16xi32>
// CHECK-DAG: %[[IMM:.*]] = arith.constant 228 : i32
// CHECK-DAG: %[[X:.*]] = vector.bitcast %arg0 : vector<64xi8> to vector<16xi32>
// CHECK-DAG: %[[Y:.*]] = vector.bitcast %arg1 : vector<64xi8> to vector<16xi32>
// CHECK: %[[R:.*]] = llvm.call_intrinsic "llvm.x86.avx512.pternlog.d.512"(%[[X]], %[[Y]], %[[M]], %[[IMM]])
// CHECK: %[[B:.*]] = vector.bitcast %[[R]] : vector<16xi32> to vector<64xi8>
// CHECK: return %[[B]]
// AVX2-LABEL: func @merge_bytes
// AVX2-NOT: pternlog
// AVX2: arith.ori
func.func @merge_bytes(%x: vector<64xi8>, %y: vector<64xi8>) -> vector<64xi8> {
  %low = arith.constant dense<3> : vector<64xi8>
  %high = arith.constant dense<-4> : vector<64xi8>
  %a = arith.andi %x, %low : vector<64xi8>
  %b = arith.andi %high, %y : vector<64xi8>
  %r = arith.ori %a, %b : vector<64xi8>
  return %r : vector<64xi8>
}

// -----

// Two registers: one ternlog each.
// CHECK-LABEL: func @merge_words
// CHECK-COUNT-2: llvm.call_intrinsic "llvm.x86.avx512.pternlog.d.512"
// CHECK-NOT: arith.ori
func.func @merge_words(%x: vector<64xi16>, %y: vector<64xi16>) -> vector<64xi16> {
  %low = arith.constant dense<255> : vector<64xi16>
  %high = arith.constant dense<-256> : vector<64xi16>
  %a = arith.andi %x, %low : vector<64xi16>
  %b = arith.andi %y, %high : vector<64xi16>
  %r = arith.ori %a, %b : vector<64xi16>
  return %r : vector<64xi16>
}

// -----

// The masks overlap (3 and -2): not a bit select.
// CHECK-LABEL: func @not_complements
// CHECK-NOT: pternlog
// CHECK: arith.ori
func.func @not_complements(%x: vector<64xi8>, %y: vector<64xi8>) -> vector<64xi8> {
  %low = arith.constant dense<3> : vector<64xi8>
  %high = arith.constant dense<-2> : vector<64xi8>
  %a = arith.andi %x, %low : vector<64xi8>
  %b = arith.andi %y, %high : vector<64xi8>
  %r = arith.ori %a, %b : vector<64xi8>
  return %r : vector<64xi8>
}

// -----

// Half a register (256 bits): left to LLVM.
// CHECK-LABEL: func @half_register
// CHECK-NOT: pternlog
// CHECK: arith.ori
func.func @half_register(%x: vector<32xi8>, %y: vector<32xi8>) -> vector<32xi8> {
  %low = arith.constant dense<3> : vector<32xi8>
  %high = arith.constant dense<-4> : vector<32xi8>
  %a = arith.andi %x, %low : vector<32xi8>
  %b = arith.andi %y, %high : vector<32xi8>
  %r = arith.ori %a, %b : vector<32xi8>
  return %r : vector<32xi8>
}

// -----

// A mask that is not a splat: left to LLVM.
// CHECK-LABEL: func @not_splat
// CHECK-NOT: pternlog
// CHECK: arith.ori
func.func @not_splat(%x: vector<16xi32>, %y: vector<16xi32>) -> vector<16xi32> {
  %low = arith.constant dense<[3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 7]> : vector<16xi32>
  %high = arith.constant dense<[-4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -8]> : vector<16xi32>
  %a = arith.andi %x, %low : vector<16xi32>
  %b = arith.andi %y, %high : vector<16xi32>
  %r = arith.ori %a, %b : vector<16xi32>
  return %r : vector<16xi32>
}
