// tq-lower-to-loops' prefetch option: where the fused products' prefetches
// of the next range's rows bring them. l1 (the default) is locality 3
// (x86's prefetcht0), l2 locality 2 (prefetcht1); nothing else changes.

// RUN: tq-opt %s -split-input-file --tq-lower-to-loops | FileCheck %s --check-prefix=L1
// RUN: tq-opt %s -split-input-file --tq-lower-to-loops="prefetch=l2" | FileCheck %s --check-prefix=L2
// RUN: not tq-opt %s -split-input-file --tq-lower-to-loops="prefetch=l3" 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: tq-lower-to-loops: prefetch must be l1 or l2, got 'l3'

// The score's rows: the start of each 50-byte row of the next range, and
// its end only where the pool's slots are not one row apart (the end's
// line is then no other row's start's) or at a page's last slot.
// L1-LABEL: func @score
// L1: memref.prefetch %{{.*}}[{{.*}}, %c0{{.*}}], read, locality<3>, data
// L1: %{{.*}}, %{{.*}}, %[[SIZES:.*]]:4, %[[STRIDES:.*]]:4 = memref.extract_strided_metadata
// L1: %[[LAST:.*]] = arith.subi %[[SIZES]]#1, %c1
// L1: %[[APART:.*]] = arith.cmpi ne, %[[STRIDES]]#1, %c50
// L1: %[[AT_LAST:.*]] = arith.cmpi eq, %{{.*}}, %[[LAST]]
// L1: %[[FAR:.*]] = arith.ori %[[APART]], %[[AT_LAST]]
// L1: scf.if %[[FAR]] {
// L1: memref.prefetch %{{.*}}[{{.*}}, %c49{{.*}}], read, locality<3>, data
// L1-NOT: locality<2>
// L2-LABEL: func @score
// L2: memref.prefetch %{{.*}}[{{.*}}, %c0{{.*}}], read, locality<2>, data
// L2: scf.if
// L2: memref.prefetch %{{.*}}[{{.*}}, %c49{{.*}}], read, locality<2>, data
// L2-NOT: locality<3>
func.func @score(%q: tensor<1x2x128xf32>, %kb: tensor<5x1x50xi8>) -> tensor<1x2x5xf32> {
  %k = tq.from_bytes %kb : tensor<5x1x50xi8> -> !tq.cache<5x1x128, #tq.format<"turbo3_0">>
  %s = tq.score %q, %k {lookup = #tq.lookup<tile>} : tensor<1x2x128xf32>, !tq.cache<5x1x128, #tq.format<"turbo3_0">> -> tensor<1x2x5xf32>
  return %s : tensor<1x2x5xf32>
}

// -----

// The weighted sum's rows the same way.
// L1-LABEL: func @accumulate
// L1: memref.prefetch {{.*}} locality<3>, data
// L1-NOT: locality<2>
// L2-LABEL: func @accumulate
// L2: memref.prefetch {{.*}} locality<2>, data
// L2-NOT: locality<3>
func.func @accumulate(%p: tensor<1x2x5xf32>, %vb: tensor<5x1x50xi8>) -> tensor<1x2x128xf32> {
  %v = tq.from_bytes %vb : tensor<5x1x50xi8> -> !tq.cache<5x1x128, #tq.format<"turbo3_0">>
  %a = tq.accumulate %p, %v {lookup = #tq.lookup<tile>} : tensor<1x2x5xf32>, !tq.cache<5x1x128, #tq.format<"turbo3_0">> -> tensor<1x2x128xf32>
  return %a : tensor<1x2x128xf32>
}

// -----

// Rows longer than a line (100 bytes at head dim 256): both ends of every
// row, whatever the strides (a line may hold no row's start).
// L1-LABEL: func @long_rows
// L1: memref.prefetch %{{.*}}[{{.*}}, %c0{{.*}}], read, locality<3>, data
// L1-NOT: scf.if
// L1: memref.prefetch %{{.*}}[{{.*}}, %c99{{.*}}], read, locality<3>, data
func.func @long_rows(%q: tensor<1x2x256xf32>, %kb: tensor<5x1x100xi8>) -> tensor<1x2x5xf32> {
  %k = tq.from_bytes %kb : tensor<5x1x100xi8> -> !tq.cache<5x1x256, #tq.format<"turbo3_0">>
  %s = tq.score %q, %k {lookup = #tq.lookup<tile>} : tensor<1x2x256xf32>, !tq.cache<5x1x256, #tq.format<"turbo3_0">> -> tensor<1x2x5xf32>
  return %s : tensor<1x2x5xf32>
}
