// tq-lower-lane-lookup on the token-lane score's field gathers: with vbmi
// one vpmultishiftqb per 64 bytes (offsets first, then the data) and the
// byte lookup one vpermb per 64 lanes on the table repeated to 64 bytes
// (no index mask); otherwise each byte's 64-bit lane rotated right by its
// offset and truncated.

// RUN: tq-opt %s -split-input-file --tq-lower-lane-lookup="isa=avx512vnni vbmi=true" | FileCheck %s --check-prefix=VBMI
// RUN: tq-opt %s -split-input-file --tq-lower-lane-lookup=isa=avx512vnni | FileCheck %s --check-prefix=VNNI
// RUN: tq-opt %s -split-input-file --tq-lower-lane-lookup | FileCheck %s --check-prefix=PORTABLE
// RUN: not tq-opt %s -split-input-file --tq-lower-lane-lookup="isa=avx2 vbmi=true" 2>&1 | FileCheck %s --check-prefix=BADISA

// BADISA: vbmi needs an AVX-512 isa (avx512, avx512vnni or avx512bf16), got 'avx2'

// VBMI-LABEL: func @fields_then_levels
// VBMI-DAG: %[[T:.*]] = arith.constant dense<[1, 64, -64, -1, 1, 64, -64, -1,{{.*}}> : vector<64xi8>
// VBMI-DAG: %[[C:.*]] = arith.constant dense<[0, 2, 4, 6, 8, 10, 12, 14, 0, 2,
// VBMI-NOT: arith.andi
// VBMI: %[[F:.*]] = llvm.call_intrinsic "llvm.x86.avx512.pmultishift.qb.512"(%[[C]], %arg0) : (vector<64xi8>, vector<64xi8>) -> vector<64xi8>
// VBMI: llvm.call_intrinsic "llvm.x86.avx512.permvar.qi.512"(%[[T]], %[[F]]) : (vector<64xi8>, vector<64xi8>) -> vector<64xi8>
// No vbmi: the rotation of 64-bit lanes, and vpshufb after a mask.
// VNNI-LABEL: func @fields_then_levels
// VNNI-NOT: pmultishift
// VNNI: arith.shrui %{{.*}} : vector<64xi64>
// VNNI: arith.shli %{{.*}} : vector<64xi64>
// VNNI: arith.trunci %{{.*}} : vector<64xi64> to vector<64xi8>
// VNNI: arith.andi
// VNNI: llvm.call_intrinsic "llvm.x86.avx512.pshuf.b.512"
// PORTABLE-LABEL: func @fields_then_levels
// PORTABLE-NOT: llvm.call_intrinsic
// PORTABLE-DAG: %[[RIGHT:.*]] = arith.constant dense<[0, 2, 4, 6, 8, 10, 12, 14, 0, 2,{{.*}}> : vector<64xi64>
// PORTABLE-DAG: %[[LEFT:.*]] = arith.constant dense<[0, 62, 60, 58, 56, 54, 52, 50, 0, 62,{{.*}}> : vector<64xi64>
// PORTABLE: %[[Q:.*]] = vector.bitcast %arg0 : vector<64xi8> to vector<8xi64>
// PORTABLE: %[[E:.*]] = vector.shuffle %[[Q]], %[[Q]] [0, 0, 0, 0, 0, 0, 0, 0, 1, 1,
// PORTABLE: %[[R:.*]] = arith.shrui %[[E]], %[[RIGHT]]
// PORTABLE: %[[L:.*]] = arith.shli %[[E]], %[[LEFT]]
// PORTABLE: %[[O:.*]] = arith.ori %[[R]], %[[L]]
// PORTABLE: arith.trunci %[[O]] : vector<64xi64> to vector<64xi8>
func.func @fields_then_levels(%x: vector<64xi8>) -> vector<64xi8> {
  %f = tq.select_bits %x [0, 2, 4, 6, 8, 10, 12, 14, 0, 2, 4, 6, 8, 10, 12, 14,
                          0, 2, 4, 6, 8, 10, 12, 14, 0, 2, 4, 6, 8, 10, 12, 14,
                          0, 2, 4, 6, 8, 10, 12, 14, 0, 2, 4, 6, 8, 10, 12, 14,
                          0, 2, 4, 6, 8, 10, 12, 14, 0, 2, 4, 6, 8, 10, 12, 14] : vector<64xi8>
  %l = tq.byte_lookup %f [1, 64, -64, -1] : vector<64xi8>
  return %l : vector<64xi8>
}

// -----

// 16 bytes are no vpmultishiftqb: the rotation even with vbmi.
// VBMI-LABEL: func @short
// VBMI-NOT: llvm.call_intrinsic
// VBMI: arith.shrui %{{.*}} : vector<16xi64>
func.func @short(%x: vector<16xi8>) -> vector<16xi8> {
  %f = tq.select_bits %x [0, 8, 16, 24, 32, 40, 48, 56, 63, 1, 2, 3, 4, 5, 6, 7] : vector<16xi8>
  return %f : vector<16xi8>
}
