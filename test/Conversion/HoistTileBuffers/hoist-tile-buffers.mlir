// RUN: tq-opt %s --tq-hoist-tile-buffers --split-input-file | FileCheck %s
// RUN: tq-opt %s --tq-hoist-tile-buffers="max-bytes=4096" --split-input-file | FileCheck %s --check-prefix=SMALL

// A tile buffer bounded by arith.minui: one byte buffer of the bound's size
// (2 x 4 x 512 f32) before the loop nest, a view of its prefix in each
// iteration, freed after the loop. Users keep the identity-layout type.
// CHECK-LABEL: func @bounded_tile
// CHECK: %[[STORAGE:.*]] = memref.alloc() {alignment = 64 : i64} : memref<16384xi8>
// CHECK: %[[C0:.*]] = arith.constant 0 : index
// CHECK: scf.for
// CHECK:   %[[N:.*]] = arith.minui
// CHECK:   %[[VIEW:.*]] = memref.view %[[STORAGE]][%[[C0]]][%[[N]]] : memref<16384xi8> to memref<2x4x?xf32>
// CHECK:   memref.store %{{.*}}, %[[VIEW]]
// CHECK-NOT: memref.dealloc
// CHECK: }
// CHECK: memref.dealloc %[[STORAGE]] : memref<16384xi8>
// SMALL-LABEL: func @bounded_tile
// SMALL: scf.for
// SMALL:   memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<2x4x?xf32>
// SMALL:   memref.dealloc
func.func @bounded_tile(%lo: index, %hi: index, %x: f32) {
  %c0 = arith.constant 0 : index
  %c512 = arith.constant 512 : index
  scf.for %t = %lo to %hi step %c512 {
    %rest = arith.subi %hi, %t : index
    %n = arith.minui %rest, %c512 : index
    %s = memref.alloc(%n) {alignment = 64 : i64} : memref<2x4x?xf32>
    memref.store %x, %s[%c0, %c0, %c0] : memref<2x4x?xf32>
    memref.dealloc %s : memref<2x4x?xf32>
  }
  return
}

// -----

// Static buffers move out of the whole scf.for nest unchanged; sizes derived
// from a bounded one (ceil to 16, doubled) are bounded too.
// CHECK-LABEL: func @nested_and_derived
// CHECK: memref.alloc() : memref<4xf32>
// CHECK: memref.alloc() : memref<4096xi8>
// CHECK: scf.for
// CHECK:   scf.for
// CHECK:     memref.view %{{.*}} : memref<4096xi8> to memref<?xi32>
// CHECK:   }
// CHECK: }
// CHECK-DAG: memref.dealloc %{{.*}} : memref<4096xi8>
// CHECK-DAG: memref.dealloc %{{.*}} : memref<4xf32>
func.func @nested_and_derived(%lo: index, %hi: index, %x: f32, %y: i32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c16 = arith.constant 16 : index
  %c512 = arith.constant 512 : index
  scf.for %i = %c0 to %c4 step %c1 {
    scf.for %t = %lo to %hi step %c512 {
      %rest = arith.subi %hi, %t : index
      %n = arith.minui %rest, %c512 : index
      %blocks = arith.ceildivui %n, %c16 : index
      %padded = arith.muli %blocks, %c16 : index
      %twice = arith.addi %padded, %padded : index
      %a = memref.alloc() : memref<4xf32>
      %b = memref.alloc(%twice) : memref<?xi32>
      memref.store %x, %a[%c0] : memref<4xf32>
      memref.store %y, %b[%c0] : memref<?xi32>
      memref.dealloc %b : memref<?xi32>
      memref.dealloc %a : memref<4xf32>
    }
  }
  return
}

// -----

// Left alone, each for its reason:
// - %unbounded: arith.minsi of an unknown difference may be negative, so
//   its unsigned range (the size) has no bound;
// - %forall: an scf.forall's iterations may run at once, so each keeps its
//   own buffer;
// - %yielded: the buffer leaves the iteration (no dealloc in its block);
// - %outside: not in a loop.
// CHECK-LABEL: func @left_alone
// CHECK: memref.alloc() : memref<8xf32>
// CHECK: scf.for
// CHECK:   memref.alloc(%{{.*}}) : memref<?xf32>
// CHECK:   memref.dealloc
// CHECK: scf.forall
// CHECK:   memref.alloc() : memref<16xf32>
// CHECK:   memref.dealloc
// CHECK: scf.for
// CHECK:   memref.alloc() : memref<2xf32>
// CHECK-NOT: memref.view
func.func @left_alone(%lo: index, %hi: index, %x: f32) -> memref<2xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c512 = arith.constant 512 : index
  %outside = memref.alloc() : memref<8xf32>
  memref.store %x, %outside[%c0] : memref<8xf32>
  scf.for %t = %lo to %hi step %c512 {
    %rest = arith.subi %hi, %t : index
    %n = arith.minsi %rest, %c512 : index
    %unbounded = memref.alloc(%n) : memref<?xf32>
    memref.store %x, %unbounded[%c0] : memref<?xf32>
    memref.dealloc %unbounded : memref<?xf32>
  }
  scf.forall (%i) in (4) {
    %forall = memref.alloc() : memref<16xf32>
    memref.store %x, %forall[%c0] : memref<16xf32>
    memref.dealloc %forall : memref<16xf32>
  }
  %init = memref.alloc() : memref<2xf32>
  %last = scf.for %t = %lo to %hi step %c1 iter_args(%prev = %init) -> memref<2xf32> {
    %yielded = memref.alloc() : memref<2xf32>
    memref.store %x, %yielded[%c0] : memref<2xf32>
    memref.dealloc %prev : memref<2xf32>
    scf.yield %yielded : memref<2xf32>
  }
  memref.dealloc %outside : memref<8xf32>
  return %last : memref<2xf32>
}

// -----

// Elements without a byte size of their own (index, vectors) keep their
// allocation when their size is dynamic; a static one still moves.
// CHECK-LABEL: func @element_kinds
// CHECK: memref.alloc() : memref<4xindex>
// CHECK: scf.for
// CHECK:   memref.alloc(%{{.*}}) : memref<?xindex>
// CHECK:   memref.alloc(%{{.*}}) : memref<?xvector<16xf32>>
func.func @element_kinds(%lo: index, %hi: index, %v: vector<16xf32>) {
  %c0 = arith.constant 0 : index
  %c512 = arith.constant 512 : index
  scf.for %t = %lo to %hi step %c512 {
    %rest = arith.subi %hi, %t : index
    %n = arith.minui %rest, %c512 : index
    %a = memref.alloc() : memref<4xindex>
    %b = memref.alloc(%n) : memref<?xindex>
    %c = memref.alloc(%n) : memref<?xvector<16xf32>>
    memref.store %t, %a[%c0] : memref<4xindex>
    memref.store %t, %b[%c0] : memref<?xindex>
    memref.store %v, %c[%c0] : memref<?xvector<16xf32>>
    memref.dealloc %c : memref<?xvector<16xf32>>
    memref.dealloc %b : memref<?xindex>
    memref.dealloc %a : memref<4xindex>
  }
  return
}
