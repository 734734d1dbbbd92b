// RUN: tq-opt %s -split-input-file --tq-lower-lane-lookup | FileCheck %s --check-prefix=TREE
// RUN: tq-opt %s -split-input-file --tq-lower-lane-lookup=isa=avx512 | FileCheck %s --check-prefix=AVX512
// RUN: tq-opt %s -split-input-file --tq-lower-lane-lookup=isa=avx2 | FileCheck %s --check-prefix=AVX2
// RUN: not tq-opt %s --tq-lower-lane-lookup=isa=neon 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: tq-lower-lane-lookup: isa must be none, avx2, avxvnni, avx512, avx512vnni or avx512bf16, got 'neon'

// 8 levels. Select tree: bit 0 picks within pairs (4 selects), bit 1
// between pairs (2), bit 2 the half (1); no compare per level.
// TREE-LABEL: func @three_bits
// TREE-NOT: arith.cmpi eq
// TREE: %[[B0:.*]] = arith.cmpi ne, %{{.*}}, %{{.*}} : vector<16xi32>
// TREE-COUNT-4: arith.select %[[B0]]
// TREE: %[[B1:.*]] = arith.cmpi ne
// TREE-COUNT-2: arith.select %[[B1]]
// TREE: %[[B2:.*]] = arith.cmpi ne
// TREE-NEXT: %[[R:.*]] = arith.select %[[B2]]
// TREE-NEXT: return %[[R]]
// One vpermps over the 16-lane table: the 8 levels twice, so index bit 3
// (which tq.lane_lookup ignores) does not matter.
// AVX512-LABEL: func @three_bits
// AVX512: %[[T:.*]] = arith.constant dense<[0.000000e+00, 1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00, 5.000000e+00, 6.000000e+00, 7.000000e+00, 0.000000e+00, 1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00, 5.000000e+00, 6.000000e+00, 7.000000e+00]> : vector<16xf32>
// AVX512: %[[R:.*]] = llvm.call_intrinsic "llvm.x86.avx512.permvar.sf.512"(%[[T]], %arg0) : (vector<16xf32>, vector<16xi32>) -> vector<16xf32>
// AVX512-NOT: arith.select
// AVX512: return %[[R]]
// Two 8-lane vpermps, concatenated.
// AVX2-LABEL: func @three_bits
// AVX2: %[[LO:.*]] = vector.extract_strided_slice %arg0 {offsets = [0], sizes = [8], strides = [1]}
// AVX2: %[[HI:.*]] = vector.extract_strided_slice %arg0 {offsets = [8], sizes = [8], strides = [1]}
// AVX2: %[[A:.*]] = llvm.call_intrinsic "llvm.x86.avx2.permps"(%{{.*}}, %[[LO]]) : (vector<8xf32>, vector<8xi32>) -> vector<8xf32>
// AVX2: %[[B:.*]] = llvm.call_intrinsic "llvm.x86.avx2.permps"(%{{.*}}, %[[HI]])
// AVX2: %[[R:.*]] = vector.shuffle %[[A]], %[[B]] [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
// AVX2-NOT: arith.select
// AVX2: return %[[R]]
func.func @three_bits(%idx: vector<16xi32>) -> vector<16xf32> {
  %c = tq.lane_lookup %idx [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0] : vector<16xi32> -> vector<16xf32>
  return %c : vector<16xf32>
}

// -----

// 16 levels: one AVX-512 permute; too many for AVX2's 8-entry permute,
// which falls back to the select tree (15 selects).
// AVX512-LABEL: func @four_bits
// AVX512: llvm.call_intrinsic "llvm.x86.avx512.permvar.sf.512"
// AVX512-NOT: arith.select
// AVX2-LABEL: func @four_bits
// AVX2-NOT: llvm.call_intrinsic
// AVX2-COUNT-15: arith.select
func.func @four_bits(%idx: vector<16xi32>) -> vector<16xf32> {
  %c = tq.lane_lookup %idx [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0] : vector<16xi32> -> vector<16xf32>
  return %c : vector<16xf32>
}

// -----

// 4 levels over 8 lanes: AVX-512 needs multiples of 16 lanes and falls
// back to the tree (bits 0 and 1 only); AVX2 permutes once over the
// levels repeated twice (index bit 2 does not matter).
// TREE-LABEL: func @two_bits
// TREE-COUNT-3: arith.select
// TREE-NOT: arith.select
// AVX512-LABEL: func @two_bits
// AVX512-NOT: llvm.call_intrinsic
// AVX512-COUNT-3: arith.select
// AVX2-LABEL: func @two_bits
// AVX2: arith.constant dense<[-1.000000e+00, 0.000000e+00, 1.000000e+00, 2.000000e+00, -1.000000e+00, 0.000000e+00, 1.000000e+00, 2.000000e+00]> : vector<8xf32>
// AVX2: llvm.call_intrinsic "llvm.x86.avx2.permps"
func.func @two_bits(%idx: vector<8xi32>) -> vector<8xf32> {
  %c = tq.lane_lookup %idx [-1.0, 0.0, 1.0, 2.0] : vector<8xi32> -> vector<8xf32>
  return %c : vector<8xf32>
}

// -----

// A one-entry table needs no index bit: the select tree is the constant,
// whatever the ISA (a permute would only repeat it).
// TREE-LABEL: func @one_entry
// TREE-NEXT: %[[C:.*]] = arith.constant dense<5.000000e-01> : vector<16xf32>
// TREE-NEXT: return %[[C]]
// AVX512-LABEL: func @one_entry
// AVX512-NEXT: %[[C:.*]] = arith.constant dense<5.000000e-01> : vector<16xf32>
// AVX512-NEXT: return %[[C]]
// AVX2-LABEL: func @one_entry
// AVX2-NEXT: %[[C:.*]] = arith.constant dense<5.000000e-01> : vector<16xf32>
// AVX2-NEXT: return %[[C]]
func.func @one_entry(%idx: vector<16xi32>) -> vector<16xf32> {
  %c = tq.lane_lookup %idx [0.5] : vector<16xi32> -> vector<16xf32>
  return %c : vector<16xf32>
}

// -----

// 32 lanes: two AVX-512 permutes joined by one shuffle; four AVX2
// permutes joined pairwise (three shuffles).
// AVX512-LABEL: func @lanes32
// AVX512: %[[A:.*]] = llvm.call_intrinsic "llvm.x86.avx512.permvar.sf.512"
// AVX512: %[[B:.*]] = llvm.call_intrinsic "llvm.x86.avx512.permvar.sf.512"
// AVX512: %[[R:.*]] = vector.shuffle %[[A]], %[[B]] {{.*}} : vector<16xf32>, vector<16xf32>
// AVX512-NEXT: return %[[R]] : vector<32xf32>
// AVX2-LABEL: func @lanes32
// AVX2-COUNT-4: llvm.call_intrinsic "llvm.x86.avx2.permps"
// AVX2-COUNT-2: vector.shuffle {{.*}} : vector<8xf32>, vector<8xf32>
// AVX2: %[[R:.*]] = vector.shuffle {{.*}} : vector<16xf32>, vector<16xf32>
// AVX2-NEXT: return %[[R]] : vector<32xf32>
func.func @lanes32(%idx: vector<32xi32>) -> vector<32xf32> {
  %c = tq.lane_lookup %idx [0.0, 1.0] : vector<32xi32> -> vector<32xf32>
  return %c : vector<32xf32>
}

// -----

// Negative for the permutes: 48 lanes are three permute widths, which the
// pairwise concatenation cannot join (it needs a power of two of them):
// every ISA takes the select tree (one bit, one select).
// TREE-LABEL: func @lanes48
// TREE: arith.select %{{.*}} : vector<48xi1>, vector<48xf32>
// AVX512-LABEL: func @lanes48
// AVX512-NOT: llvm.call_intrinsic
// AVX512: arith.select %{{.*}} : vector<48xi1>, vector<48xf32>
// AVX2-LABEL: func @lanes48
// AVX2-NOT: llvm.call_intrinsic
// AVX2: arith.select %{{.*}} : vector<48xi1>, vector<48xf32>
func.func @lanes48(%idx: vector<48xi32>) -> vector<48xf32> {
  %c = tq.lane_lookup %idx [0.0, 1.0] : vector<48xi32> -> vector<48xf32>
  return %c : vector<48xf32>
}
