// RUN: tq-opt %s --tq-memref-copy-to-linalg | FileCheck %s

// CHECK-LABEL: func @strided
// CHECK-NOT: memref.copy
// CHECK: linalg.copy ins(%arg0 : memref<?x4xf32, strided<[?, 1], offset: ?>>) outs(%arg1 : memref<?x4xf32>)
func.func @strided(%a: memref<?x4xf32, strided<[?, 1], offset: ?>>, %b: memref<?x4xf32>) {
  memref.copy %a, %b : memref<?x4xf32, strided<[?, 1], offset: ?>> to memref<?x4xf32>
  return
}

// Every copy is rewritten, whatever the layouts and ranks (here
// contiguous and rank 0), and nothing else is touched.
// CHECK-LABEL: func @contiguous_and_scalar
// CHECK-NOT: memref.copy
// CHECK: linalg.copy ins(%arg0 : memref<2x3xi8>) outs(%arg1 : memref<2x3xi8>)
// CHECK: linalg.copy ins(%arg2 : memref<f32>) outs(%arg3 : memref<f32>)
// CHECK: memref.store
func.func @contiguous_and_scalar(%a: memref<2x3xi8>, %b: memref<2x3xi8>, %s: memref<f32>, %t: memref<f32>, %x: f32) {
  memref.copy %a, %b : memref<2x3xi8> to memref<2x3xi8>
  memref.copy %s, %t : memref<f32> to memref<f32>
  memref.store %x, %t[] : memref<f32>
  return
}
