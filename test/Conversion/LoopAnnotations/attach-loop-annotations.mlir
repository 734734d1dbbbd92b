// RUN: tq-opt %s --convert-scf-to-cf --convert-to-llvm \
// RUN:   --tq-attach-loop-annotations | FileCheck %s
// RUN: tq-opt %s --convert-scf-to-cf --convert-to-llvm \
// RUN:   | FileCheck %s --check-prefix=WITHOUT

// scf-to-cf leaves the hint as a discardable attribute of the back edge,
// which the LLVM IR translation ignores; the pass moves it into the
// branch's loop_annotation property.

#no_unroll = #llvm.loop_annotation<unroll = <disable = true>>

// CHECK-DAG: #[[NOUNROLL:.*]] = #llvm.loop_unroll<disable = true>
// CHECK-DAG: #[[FULLUNROLL:.*]] = #llvm.loop_unroll<full = true>
// CHECK-DAG: #[[HINT:.*]] = #llvm.loop_annotation<unroll = #[[NOUNROLL]]>
// CHECK-DAG: #[[FULL:.*]] = #llvm.loop_annotation<unroll = #[[FULLUNROLL]]>
// CHECK-LABEL: llvm.func @hinted
// CHECK: llvm.br ^bb1(%{{.*}} : i64) {loop_annotation = #[[HINT]]}
// CHECK-NOT: llvm.loop_annotation
// WITHOUT-LABEL: llvm.func @hinted
// WITHOUT: llvm.br ^bb1(%{{.*}} : i64) {llvm.loop_annotation = #loop_annotation}
func.func @hinted(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
  } {llvm.loop_annotation = #no_unroll}
  return
}

// A branch that already has a property keeps it.
#full = #llvm.loop_annotation<unroll = <full = true>>
// CHECK-LABEL: llvm.func @both
// CHECK: llvm.br ^bb1 {loop_annotation = #[[FULL]]}
// CHECK-NOT: llvm.loop_annotation
llvm.func @both() {
  llvm.br ^bb1 {loop_annotation = #full, llvm.loop_annotation = #no_unroll}
^bb1:
  llvm.return
}

// A conditional back edge (a do-while loop's latch) gets its hint the
// same way.
// CHECK-LABEL: llvm.func @cond_latch
// CHECK: llvm.cond_br %{{.*}}, ^bb1, ^bb2 {loop_annotation = #[[HINT]]}
// CHECK-NOT: llvm.loop_annotation
// WITHOUT-LABEL: llvm.func @cond_latch
// WITHOUT: llvm.cond_br %{{.*}}, ^bb1, ^bb2 {llvm.loop_annotation = #loop_annotation}
llvm.func @cond_latch(%c: i1) {
  llvm.br ^bb1
^bb1:
  llvm.cond_br %c, ^bb1, ^bb2 {llvm.loop_annotation = #no_unroll}
^bb2:
  llvm.return
}

// Negative: branches without a hint are left as they are.
// CHECK-LABEL: llvm.func @no_hint
// CHECK: llvm.cond_br %{{.*}}, ^bb1, ^bb2{{$}}
// CHECK: llvm.br ^bb2{{$}}
llvm.func @no_hint(%c: i1) {
  llvm.cond_br %c, ^bb1, ^bb2
^bb1:
  llvm.br ^bb2
^bb2:
  llvm.return
}
