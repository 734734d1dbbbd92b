// RUN: tq-opt %s --tq-memref-copy-to-linalg | FileCheck %s

// CHECK-LABEL: func @strided
// CHECK-NOT: memref.copy
// CHECK: linalg.copy ins(%arg0 : memref<?x4xf32, strided<[?, 1], offset: ?>>) outs(%arg1 : memref<?x4xf32>)
func.func @strided(%a: memref<?x4xf32, strided<[?, 1], offset: ?>>, %b: memref<?x4xf32>) {
  memref.copy %a, %b : memref<?x4xf32, strided<[?, 1], offset: ?>> to memref<?x4xf32>
  return
}
