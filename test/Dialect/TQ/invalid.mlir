// RUN: tq-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{unknown format 'turbo5_0' (known: tq3_0,}}
func.func @f() attributes {a = #tq.format<"turbo5_0">} { return }

// -----

// expected-error @+1 {{codebook bits must be in [1, 8], got 9}}
func.func @f() attributes {a = #tq.codebook<bits = 9, centroids = [0.0], thresholds = []>} { return }

// -----

// expected-error @+1 {{a 2-bit codebook has 4 centroids, got 2}}
func.func @f() attributes {a = #tq.codebook<bits = 2, centroids = [-1.0, 1.0], thresholds = [0.0]>} { return }

// -----

// expected-error @+1 {{codebook with 2 centroids needs 1 thresholds, got 2}}
func.func @f() attributes {a = #tq.codebook<bits = 1, centroids = [-1.0, 1.0], thresholds = [0.0, 0.5]>} { return }

// -----

// expected-error @+1 {{invalid codebook: codebook: centroids must be strictly increasing (centroid 1 is not above centroid 0)}}
func.func @f() attributes {a = #tq.codebook<bits = 1, centroids = [1.0, -1.0], thresholds = [0.0]>} { return }

// -----

// expected-error @+1 {{identity rotation takes only a dim}}
func.func @f() attributes {a = #tq.rotation<kind = identity, dim = 4, signs1 = [1, 1, 1, 1]>} { return }

// -----

// expected-error @+1 {{hadamard rotation needs signs1}}
func.func @f() attributes {a = #tq.rotation<kind = hadamard, dim = 4, block = 4>} { return }

// -----

// expected-error @+1 {{hadamard rotation has block == dim (8), got block 4}}
func.func @f() attributes {a = #tq.rotation<kind = hadamard, dim = 8, block = 4, signs1 = [1, 1, 1, 1]>} { return }

// -----

// expected-error @+1 {{signs1 has 2 entries, expected dim 4}}
func.func @f() attributes {a = #tq.rotation<kind = hadamard, dim = 4, block = 4, signs1 = [1, 1]>} { return }

// -----

// expected-error @+1 {{hadamard rotation takes literal signs, not a seed}}
func.func @f() attributes {a = #tq.rotation<kind = hadamard, dim = 2, block = 2, signs1 = [1, 1], seed = 3>} { return }

// -----

// expected-error @+1 {{signs1[1] is 0; sign vectors hold +1 or -1}}
func.func @f() attributes {a = #tq.rotation<kind = hadamard, dim = 2, block = 2, signs1 = [1, 0]>} { return }

// -----

// expected-error @+1 {{second sign vector has 2 entries, expected 4}}
func.func @f() attributes {a = #tq.rotation<kind = hadamard, dim = 4, block = 4, signs1 = [1, 1, 1, 1], signs2 = [1, 1]>} { return }

// -----

// expected-error @+1 {{signs1 has 4 entries, expected block 2}}
func.func @f() attributes {a = #tq.rotation<kind = block_hadamard, dim = 8, block = 2, signs1 = [1, 1, 1, 1]>} { return }

// -----

// expected-error @+1 {{rotation dim 6 is not a positive multiple of the hadamard block 4}}
func.func @f() attributes {a = #tq.rotation<kind = block_hadamard, dim = 6, block = 4, signs1 = [1, 1, 1, 1]>} { return }

// -----

// expected-error @+1 {{hadamard block size 3 is not a power of two}}
func.func @f() attributes {a = #tq.rotation<kind = block_hadamard, dim = 6, block = 3, signs1 = [1, 1, 1]>} { return }

// -----

// expected-error @+1 {{haar rotation takes a dim and a seed only}}
func.func @f() attributes {a = #tq.rotation<kind = haar, dim = 2, signs1 = [1, 1]>} { return }

// -----

// expected-error @+1 {{haar rotation dim 5000 is outside [1, 4096]}}
func.func @f() attributes {a = #tq.rotation<kind = haar, dim = 5000>} { return }

// -----

// expected-error @+1 {{cache shape is tokens x kv_heads x head_dim, got 2 dimensions}}
func.func @f(%c: !tq.cache<8x128, #tq.format<"turbo3_0">>) { return }

// -----

// expected-error @+1 {{cache kv_heads must be a static positive size}}
func.func @f(%c: !tq.cache<8x?x128, #tq.format<"turbo3_0">>) { return }

// -----

// expected-error @+1 {{cache head_dim must be a static positive size}}
func.func @f(%c: !tq.cache<8x2x?, #tq.format<"turbo3_0">>) { return }

// -----

// expected-error @+1 {{haar4 needs a head dim of at least 3, got 2}}
func.func @f(%c: !tq.cache<8x2x2, #tq.format<"haar4">>) { return }

// -----

func.func @f(%b: tensor<?x8x49xi8>) {
  // expected-error @+1 {{'tq.from_bytes' op bytes row bytes is 49, expected 50}}
  %c = tq.from_bytes %b : tensor<?x8x49xi8> -> !tq.cache<?x8x128, #tq.format<"turbo3_0">>
  return
}

// -----

func.func @f(%c: !tq.cache<?x8x128, #tq.format<"turbo3_0">>) {
  // expected-error @+1 {{'tq.to_bytes' op bytes kv heads is 4, expected 8}}
  %b = tq.to_bytes %c : !tq.cache<?x8x128, #tq.format<"turbo3_0">> -> tensor<?x4x50xi8>
  return
}

// -----

func.func @f(%x: tensor<16x2x64xf32>) {
  // expected-error @+1 {{'tq.quantize' op input head dim is 64, expected 80}}
  %c = tq.quantize %x : tensor<16x2x64xf32> -> !tq.cache<16x2x80, #tq.format<"polar3">>
  return
}

// -----

func.func @f(%c: !tq.cache<16x2x80, #tq.format<"polar3">>) {
  // expected-error @+1 {{'tq.gather' op result padded head dim is 80, expected 128}}
  %g = tq.gather %c : !tq.cache<16x2x80, #tq.format<"polar3">> -> tensor<16x2x80xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'tq.rotate' op last dimension is 8, the rotation acts on 4}}
  %r = tq.rotate %x {rotation = #tq.rotation<kind = identity, dim = 4>} : tensor<2x8xf32>
  return
}

// -----

func.func @f(%x: tensor<f32>) {
  // expected-error @+1 {{'tq.rotate' op rotates the last dimension; operand is rank 0}}
  %r = tq.rotate %x {rotation = #tq.rotation<kind = identity, dim = 4>} : tensor<f32>
  return
}

// -----

func.func @f(%q: tensor<1x8x64xf32>, %k: tensor<?x2x32xf32>) {
  // expected-error @+1 {{'tq.qk' op key head dim is 32, expected 64}}
  %s = tq.qk %q, %k : tensor<1x8x64xf32>, tensor<?x2x32xf32> -> tensor<1x8x?xf32>
  return
}

// -----

func.func @f(%q: tensor<1x7x64xf32>, %k: tensor<?x2x64xf32>) {
  // expected-error @+1 {{'tq.qk' op query heads (7) must be a multiple of kv heads (2)}}
  %s = tq.qk %q, %k : tensor<1x7x64xf32>, tensor<?x2x64xf32> -> tensor<1x7x?xf32>
  return
}

// -----

func.func @f(%q: tensor<1x8x64xf32>, %k: tensor<10x2x64xf32>) {
  // expected-error @+1 {{'tq.qk' op result tokens is 9, expected 10}}
  %s = tq.qk %q, %k : tensor<1x8x64xf32>, tensor<10x2x64xf32> -> tensor<1x8x9xf32>
  return
}

// -----

func.func @f(%s: tensor<1x8x10xf32>) {
  // expected-error @+1 {{'tq.softmax' op result type 'tensor<1x8x?xf32>' differs from the logits type 'tensor<1x8x10xf32>'}}
  %p = tq.softmax %s {scale = 1.0 : f32} : tensor<1x8x10xf32> -> tensor<1x8x?xf32>
  return
}

// -----

func.func @f(%s: tensor<1x8x10xf32>) {
  // expected-error @+1 {{'tq.softmax' op scale must be finite and positive, got 0}}
  %p = tq.softmax %s {scale = 0.0 : f32} : tensor<1x8x10xf32> -> tensor<1x8x10xf32>
  return
}

// -----

func.func @f(%s: tensor<1x8x10xf32>) {
  // expected-error @+1 {{'tq.softmax' op window must be non-negative, got -1}}
  %p = tq.softmax %s {scale = 1.0 : f32, window = -1} : tensor<1x8x10xf32> -> tensor<1x8x10xf32>
  return
}

// -----

func.func @f(%s: tensor<1x8x10xf32>) {
  // expected-error @+1 {{'tq.softmax' op softcap must be finite and non-negative, got -2}}
  %p = tq.softmax %s {scale = 1.0 : f32, softcap = -2.0 : f32} : tensor<1x8x10xf32> -> tensor<1x8x10xf32>
  return
}

// -----

func.func @f(%s: tensor<11x8x10xf32>) {
  // expected-error @+1 {{'tq.softmax' op causal attention needs queries (11) <= tokens (10)}}
  %p = tq.softmax %s {scale = 1.0 : f32, causal} : tensor<11x8x10xf32> -> tensor<11x8x10xf32>
  return
}

// -----

func.func @f(%s: tensor<2x8x10xf32>, %m: tensor<2x9xf32>) {
  // expected-error @+1 {{'tq.softmax' op mask tokens is 9, expected 10}}
  %p = tq.softmax %s mask(%m : tensor<2x9xf32>) {scale = 1.0 : f32} : tensor<2x8x10xf32> -> tensor<2x8x10xf32>
  return
}

// -----

func.func @f(%p: tensor<1x8x10xf32>, %v: tensor<12x2x64xf32>) {
  // expected-error @+1 {{'tq.pv' op value tokens is 12, expected 10}}
  %o = tq.pv %p, %v : tensor<1x8x10xf32>, tensor<12x2x64xf32> -> tensor<1x8x64xf32>
  return
}

// -----

func.func @f(%p: tensor<1x8x10xf32>, %v: tensor<10x2x64xf32>) {
  // expected-error @+1 {{'tq.pv' op result head dim is 32, expected 64}}
  %o = tq.pv %p, %v : tensor<1x8x10xf32>, tensor<10x2x64xf32> -> tensor<1x8x32xf32>
  return
}

// -----

func.func @f(%q: tensor<1x8x96xf32>, %k: !tq.cache<?x2x96, #tq.format<"turbo3_0">>) {
  // expected-error @+1 {{'tq.score' op query dim (the key format's padded head dim) is 96, expected 128}}
  %s = tq.score %q, %k : tensor<1x8x96xf32>, !tq.cache<?x2x96, #tq.format<"turbo3_0">> -> tensor<1x8x?xf32>
  return
}

// -----

func.func @f(%q: tensor<1x3x128xf32>, %k: !tq.cache<?x2x128, #tq.format<"turbo3_0">>) {
  // expected-error @+1 {{'tq.score' op query heads (3) must be a multiple of kv heads (2)}}
  %s = tq.score %q, %k : tensor<1x3x128xf32>, !tq.cache<?x2x128, #tq.format<"turbo3_0">> -> tensor<1x3x?xf32>
  return
}

// -----

func.func @f(%p: tensor<1x8x?xf32>, %v: !tq.cache<?x2x80, #tq.format<"polar2">>) {
  // expected-error @+1 {{'tq.accumulate' op result padded head dim is 80, expected 128}}
  %a = tq.accumulate %p, %v : tensor<1x8x?xf32>, !tq.cache<?x2x80, #tq.format<"polar2">> -> tensor<1x8x80xf32>
  return
}

// -----

func.func @f(%p: tensor<1x8x9xf32>, %v: !tq.cache<10x2x128, #tq.format<"polar2">>) {
  // expected-error @+1 {{'tq.accumulate' op value tokens is 10, expected 9}}
  %a = tq.accumulate %p, %v : tensor<1x8x9xf32>, !tq.cache<10x2x128, #tq.format<"polar2">> -> tensor<1x8x128xf32>
  return
}

// -----

func.func @f(%q: tensor<1x8x128xf32>, %k: !tq.cache<?x2x128, #tq.format<"turbo3_0">>, %v: !tq.cache<?x2x64, #tq.format<"turbo3_0">>) {
  // K and V head dims may differ (MLA), but the output rows have V's.
  // expected-error @+1 {{'tq.attention' op result head dim is 128, expected 64}}
  %o = tq.attention %q, %k, %v : tensor<1x8x128xf32>, !tq.cache<?x2x128, #tq.format<"turbo3_0">>, !tq.cache<?x2x64, #tq.format<"turbo3_0">> -> tensor<1x8x128xf32>
  return
}

// -----

func.func @f(%q: tensor<1x8x64xf32>, %k: !tq.cache<?x2x128, #tq.format<"turbo3_0">>, %v: !tq.cache<?x2x128, #tq.format<"turbo3_0">>) {
  // expected-error @+1 {{'tq.attention' op query head dim is 64, expected 128}}
  %o = tq.attention %q, %k, %v : tensor<1x8x64xf32>, !tq.cache<?x2x128, #tq.format<"turbo3_0">>, !tq.cache<?x2x128, #tq.format<"turbo3_0">> -> tensor<1x8x64xf32>
  return
}

// -----

func.func @f(%q: tensor<1x8x128xf32>, %k: !tq.cache<?x2x128, #tq.format<"turbo3_0">>, %v: !tq.cache<?x4x128, #tq.format<"turbo3_0">>) {
  // expected-error @+1 {{'tq.attention' op key cache has 2 kv heads, value cache 4}}
  %o = tq.attention %q, %k, %v : tensor<1x8x128xf32>, !tq.cache<?x2x128, #tq.format<"turbo3_0">>, !tq.cache<?x4x128, #tq.format<"turbo3_0">> -> tensor<1x8x128xf32>
  return
}

// -----

func.func @f(%q: tensor<1x8x128xf32>, %k: !tq.cache<10x2x128, #tq.format<"turbo3_0">>, %v: !tq.cache<11x2x128, #tq.format<"turbo3_0">>) {
  // expected-error @+1 {{'tq.attention' op value tokens is 11, expected 10}}
  %o = tq.attention %q, %k, %v : tensor<1x8x128xf32>, !tq.cache<10x2x128, #tq.format<"turbo3_0">>, !tq.cache<11x2x128, #tq.format<"turbo3_0">> -> tensor<1x8x128xf32>
  return
}

// -----

func.func @f(%q: tensor<1x6x128xf32>, %k: !tq.cache<?x4x128, #tq.format<"turbo3_0">>, %v: !tq.cache<?x4x128, #tq.format<"turbo3_0">>) {
  // expected-error @+1 {{'tq.attention' op query heads (6) must be a multiple of kv heads (4)}}
  %o = tq.attention %q, %k, %v : tensor<1x6x128xf32>, !tq.cache<?x4x128, #tq.format<"turbo3_0">>, !tq.cache<?x4x128, #tq.format<"turbo3_0">> -> tensor<1x6x128xf32>
  return
}

// -----

func.func @f(%q: tensor<1x8x128xf32>, %k: !tq.cache<?x2x128, #tq.format<"turbo3_0">>, %v: !tq.cache<?x2x128, #tq.format<"turbo3_0">>) {
  // expected-error @+1 {{'tq.attention' op result heads is 4, expected 8}}
  %o = tq.attention %q, %k, %v : tensor<1x8x128xf32>, !tq.cache<?x2x128, #tq.format<"turbo3_0">>, !tq.cache<?x2x128, #tq.format<"turbo3_0">> -> tensor<1x4x128xf32>
  return
}

// -----

func.func @f(%q: tensor<1x8x128xf32>, %k: !tq.cache<?x2x128, #tq.format<"turbo3_0">>, %v: !tq.cache<?x2x128, #tq.format<"turbo3_0">>) {
  // expected-error @+1 {{'tq.attention' op scale must be finite and positive, got -1}}
  %o = tq.attention %q, %k, %v {scale = -1.0 : f32} : tensor<1x8x128xf32>, !tq.cache<?x2x128, #tq.format<"turbo3_0">>, !tq.cache<?x2x128, #tq.format<"turbo3_0">> -> tensor<1x8x128xf32>
  return
}

// -----

func.func @f(%q: tensor<3x8x128xf32>, %k: !tq.cache<?x2x128, #tq.format<"turbo3_0">>, %v: !tq.cache<?x2x128, #tq.format<"turbo3_0">>, %m: tensor<2x?xf32>) {
  // expected-error @+1 {{'tq.attention' op mask queries is 2, expected 3}}
  %o = tq.attention %q, %k, %v mask(%m : tensor<2x?xf32>) : tensor<3x8x128xf32>, !tq.cache<?x2x128, #tq.format<"turbo3_0">>, !tq.cache<?x2x128, #tq.format<"turbo3_0">> -> tensor<3x8x128xf32>
  return
}

// -----

func.func @f(%q: tensor<9x8x128xf32>, %k: !tq.cache<8x2x128, #tq.format<"turbo3_0">>, %v: !tq.cache<8x2x128, #tq.format<"turbo3_0">>) {
  // expected-error @+1 {{'tq.attention' op causal attention needs queries (9) <= tokens (8)}}
  %o = tq.attention %q, %k, %v {causal} : tensor<9x8x128xf32>, !tq.cache<8x2x128, #tq.format<"turbo3_0">>, !tq.cache<8x2x128, #tq.format<"turbo3_0">> -> tensor<9x8x128xf32>
  return
}

// -----

func.func @f(%k: !tq.cache<?x2x128, #tq.format<"turbo3_0">>, %i: index) {
  // expected-error @+1 {{'tq.slice_tokens' op result '!tq.cache<?x2x128, #tq.format<"turbo4_0">>' must differ from the source '!tq.cache<?x2x128, #tq.format<"turbo3_0">>' in its token count only}}
  %t = tq.slice_tokens %k[%i, %i] : !tq.cache<?x2x128, #tq.format<"turbo3_0">> -> !tq.cache<?x2x128, #tq.format<"turbo4_0">>
  return
}

// -----

func.func @f(%s: tensor<1x4x?xf32>, %m: tensor<1x3xf32>, %i: index) {
  // expected-error @+1 {{'tq.online_softmax' op max heads is 3, expected 4}}
  %p, %m1, %l1, %c = tq.online_softmax %s, %m, %m, %i, %i {scale = 1.0 : f32} : tensor<1x4x?xf32>, tensor<1x3xf32> -> tensor<1x4x?xf32>
  return
}

// -----

func.func @f(%s: tensor<1x4x?xf32>, %m: tensor<1x4xf32>, %i: index) {
  // expected-error @+1 {{'tq.online_softmax' op scale must be finite and positive, got 0}}
  %p, %m1, %l1, %c = tq.online_softmax %s, %m, %m, %i, %i {scale = 0.0 : f32} : tensor<1x4x?xf32>, tensor<1x4xf32> -> tensor<1x4x?xf32>
  return
}

// -----

func.func @f(%a: tensor<1x4x128xf32>, %c: tensor<2x4xf32>) {
  // expected-error @+1 {{'tq.merge_tile' op correction queries is 2, expected 1}}
  %r = tq.merge_tile %a, %c, %a : tensor<1x4x128xf32>, tensor<2x4xf32>
  return
}

// -----

func.func @f(%a: tensor<1x4x128xf32>, %l: tensor<1x5xf32>) {
  // expected-error @+1 {{'tq.normalize' op sum heads is 5, expected 4}}
  %r = tq.normalize %a, %l : tensor<1x4x128xf32>, tensor<1x5xf32>
  return
}

// -----

func.func @f(%m: tensor<3x1x4xf32>, %a: tensor<2x1x4x128xf32>) {
  // expected-error @+1 {{'tq.combine' op acc splits is 2, expected 3}}
  %r = tq.combine %m, %m, %a : tensor<3x1x4xf32>, tensor<2x1x4x128xf32> -> tensor<1x4x128xf32>
  return
}

// -----

func.func @f(%m: tensor<3x1x4xf32>, %a: tensor<3x1x4x128xf32>) {
  // expected-error @+1 {{'tq.combine' op result width is 64, expected 128}}
  %r = tq.combine %m, %m, %a : tensor<3x1x4xf32>, tensor<3x1x4x128xf32> -> tensor<1x4x64xf32>
  return
}

// -----

func.func @f(%pool: tensor<?x16x8x49xi8>, %table: tensor<?xi32>, %n: index) {
  // expected-error @+1 {{'tq.from_pages' op pages row bytes is 49, expected 50}}
  %k = tq.from_pages %pool[%table], %n : tensor<?x16x8x49xi8>, tensor<?xi32> -> !tq.cache<?x8x128, #tq.format<"turbo3_0">>
  return
}

// -----

func.func @f(%pool: tensor<?x16x4x50xi8>, %table: tensor<?xi32>, %n: index) {
  // expected-error @+1 {{'tq.from_pages' op pages kv heads is 4, expected 8}}
  %k = tq.from_pages %pool[%table], %n : tensor<?x16x4x50xi8>, tensor<?xi32> -> !tq.cache<?x8x128, #tq.format<"turbo3_0">>
  return
}

// -----

// Slots are addressed in 32 bits: a page of 2^32 slots is refused.
func.func @f(%pool: tensor<?x4294967296x8x50xi8>, %table: tensor<?xi32>, %n: index) {
  // expected-error @+1 {{'tq.from_pages' op page size is 4294967296, more than 2^32 - 1 slots}}
  %k = tq.from_pages %pool[%table], %n : tensor<?x4294967296x8x50xi8>, tensor<?xi32> -> !tq.cache<?x8x128, #tq.format<"turbo3_0">>
  return
}

// -----

func.func @lane_lookup_empty_table(%idx: vector<16xi32>) -> vector<16xf32> {
  // expected-error @+1 {{table needs a power of two from 1 to 16 entries, got 0}}
  %c = tq.lane_lookup %idx [] : vector<16xi32> -> vector<16xf32>
  return %c : vector<16xf32>
}

// -----

func.func @lane_lookup_table_not_power_of_two(%idx: vector<4xi32>) -> vector<4xf32> {
  // expected-error @+1 {{table needs a power of two from 1 to 16 entries, got 3}}
  %c = tq.lane_lookup %idx [-1.0, 0.0, 1.0] : vector<4xi32> -> vector<4xf32>
  return %c : vector<4xf32>
}

// -----

func.func @lane_lookup_table_too_large(%idx: vector<4xi32>) -> vector<4xf32> {
  // expected-error @+1 {{table needs a power of two from 1 to 16 entries, got 17}}
  %c = tq.lane_lookup %idx [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0] : vector<4xi32> -> vector<4xf32>
  return %c : vector<4xf32>
}

// -----

func.func @lane_lookup_lanes_differ(%idx: vector<4xi32>) -> vector<8xf32> {
  // expected-error @+1 {{all of {index, result} have same shape}}
  %c = tq.lane_lookup %idx [0.0, 1.0] : vector<4xi32> -> vector<8xf32>
  return %c : vector<8xf32>
}

// -----

func.func @f(%q: tensor<1x8x128xf32>, %k: !tq.cache<?x2x128, #tq.format<"turbo3_0">>, %v: !tq.cache<?x2x128, #tq.format<"turbo3_0">>, %slopes: tensor<8xf32>) {
  // ALiBi slopes multiply the mask; without one they would mean nothing.
  // expected-error @+1 {{'tq.attention' op slopes scale the mask, but there is no mask}}
  %o = tq.attention %q, %k, %v slopes(%slopes : tensor<8xf32>) : tensor<1x8x128xf32>, !tq.cache<?x2x128, #tq.format<"turbo3_0">>, !tq.cache<?x2x128, #tq.format<"turbo3_0">> -> tensor<1x8x128xf32>
  return
}

// -----

func.func @f(%q: tensor<1x8x128xf32>, %k: !tq.cache<?x2x128, #tq.format<"turbo3_0">>, %v: !tq.cache<?x2x128, #tq.format<"turbo3_0">>, %m: tensor<1x?xf16>, %slopes: tensor<2xf32>) {
  // Slopes are per query head (8), not per KV head (2).
  // expected-error @+1 {{'tq.attention' op slopes (one per query head) is 2, expected 8}}
  %o = tq.attention %q, %k, %v mask(%m : tensor<1x?xf16>) slopes(%slopes : tensor<2xf32>) : tensor<1x8x128xf32>, !tq.cache<?x2x128, #tq.format<"turbo3_0">>, !tq.cache<?x2x128, #tq.format<"turbo3_0">> -> tensor<1x8x128xf32>
  return
}

// -----

func.func @f(%q: tensor<1x8x128xf32>, %k: !tq.cache<?x2x128, #tq.format<"turbo3_0">>, %v: !tq.cache<?x2x128, #tq.format<"turbo3_0">>, %sinks: tensor<4xf32>) {
  // expected-error @+1 {{'tq.attention' op sinks (one per query head) is 4, expected 8}}
  %o = tq.attention %q, %k, %v sinks(%sinks : tensor<4xf32>) : tensor<1x8x128xf32>, !tq.cache<?x2x128, #tq.format<"turbo3_0">>, !tq.cache<?x2x128, #tq.format<"turbo3_0">> -> tensor<1x8x128xf32>
  return
}

// -----

func.func @f(%s: tensor<2x8x10xf32>, %sinks: tensor<3xf32>) {
  // expected-error @+1 {{'tq.softmax' op sinks (one per query head) is 3, expected 8}}
  %p = tq.softmax %s sinks(%sinks : tensor<3xf32>) {scale = 1.0 : f32} : tensor<2x8x10xf32> -> tensor<2x8x10xf32>
  return
}

// -----

func.func @f(%s: tensor<2x8x10xf32>, %m: tensor<2x10xbf16>) {
  // Masks are f32 or f16 (llama.cpp's); other element types are not read.
  // expected-error @+1 {{'tq.softmax' op operand #1 must be 2D tensor of 16-bit float or 32-bit float values}}
  %p = tq.softmax %s mask(%m : tensor<2x10xbf16>) {scale = 1.0 : f32} : tensor<2x8x10xf32> -> tensor<2x8x10xf32>
  return
}

// -----

func.func @f(%s: tensor<1x4x?xf32>, %max: tensor<1x4xf32>, %t0: index, %n: index, %slopes: tensor<4xf32>) {
  // expected-error @+1 {{'tq.online_softmax' op slopes scale the mask, but there is no mask}}
  %p, %m1, %l1, %c = tq.online_softmax %s, %max, %max, %t0, %n slopes(%slopes : tensor<4xf32>) {scale = 1.0 : f32} : tensor<1x4x?xf32>, tensor<1x4xf32> -> tensor<1x4x?xf32>
  return
}

// -----

// The lse holds one value per (query, head) of the result.
func.func @attention_lse_heads(%q: tensor<1x4x64xf32>, %k: !tq.cache<?x1x64, #tq.format<"turbo3_0">>, %v: !tq.cache<?x1x64, #tq.format<"turbo3_0">>) {
  // expected-error @+1 {{'tq.attention' op lse heads is 2, expected 4}}
  %o, %l = tq.attention %q, %k, %v : tensor<1x4x64xf32>, !tq.cache<?x1x64, #tq.format<"turbo3_0">>, !tq.cache<?x1x64, #tq.format<"turbo3_0">> -> tensor<1x4x64xf32>, tensor<1x2xf32>
  return
}

// -----

func.func @attention_lse_queries(%q: tensor<3x4x64xf32>, %k: !tq.cache<?x1x64, #tq.format<"turbo3_0">>, %v: !tq.cache<?x1x64, #tq.format<"turbo3_0">>) {
  // expected-error @+1 {{'tq.attention' op lse queries is 1, expected 3}}
  %o, %l = tq.attention %q, %k, %v : tensor<3x4x64xf32>, !tq.cache<?x1x64, #tq.format<"turbo3_0">>, !tq.cache<?x1x64, #tq.format<"turbo3_0">> -> tensor<3x4x64xf32>, tensor<1x4xf32>
  return
}

// -----

func.func @softmax_lse_heads(%s: tensor<1x8x10xf32>) {
  // expected-error @+1 {{'tq.softmax' op lse heads is 4, expected 8}}
  %p, %l = tq.softmax %s {scale = 1.0 : f32} : tensor<1x8x10xf32> -> tensor<1x8x10xf32>, tensor<1x4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Attribute and type parameters (further cases)
//===----------------------------------------------------------------------===//

// expected-error @+1 {{unknown format '' (known: tq3_0,}}
func.func @f() attributes {a = #tq.format<"">} { return }

// -----

// expected-error @+1 {{codebook bits must be in [1, 8], got 0}}
func.func @f() attributes {a = #tq.codebook<bits = 0, centroids = [0.0], thresholds = []>} { return }

// -----

// A decision threshold outside its two centroids would quantise values to
// a cell that is not the nearest.
// expected-error @+1 {{invalid codebook: codebook: threshold 0 must lie between centroids 0 and 1}}
func.func @f() attributes {a = #tq.codebook<bits = 1, centroids = [-1.0, 1.0], thresholds = [2.0]>} { return }

// -----

// All three codebook parameters are required.
// expected-error @+1 {{expected ','}}
func.func @f() attributes {a = #tq.codebook<bits = 1, centroids = [-1.0, 1.0]>} { return }

// -----

// expected-error @+1 {{rotation dim must be positive}}
func.func @f() attributes {a = #tq.rotation<kind = identity, dim = 0>} { return }

// -----

// expected-error @+1 {{identity rotation takes only a dim}}
func.func @f() attributes {a = #tq.rotation<kind = identity, dim = 4, block = 4>} { return }

// -----

// expected-error @+1 {{identity rotation takes only a dim}}
func.func @f() attributes {a = #tq.rotation<kind = identity, dim = 4, seed = 1>} { return }

// -----

// A full Hadamard transform needs a power-of-two dim.
// expected-error @+1 {{hadamard block size 6 is not a power of two}}
func.func @f() attributes {a = #tq.rotation<kind = hadamard, dim = 6, block = 6, signs1 = [1, 1, 1, 1, 1, 1]>} { return }

// -----

// expected-error @+1 {{block_hadamard rotation needs signs1}}
func.func @f() attributes {a = #tq.rotation<kind = block_hadamard, dim = 8, block = 4>} { return }

// -----

// expected-error @+1 {{block_hadamard rotation takes literal signs, not a seed}}
func.func @f() attributes {a = #tq.rotation<kind = block_hadamard, dim = 8, block = 4, signs1 = [1, 1, 1, 1], seed = 2>} { return }

// -----

// expected-error @+1 {{signs2[3] is 2; sign vectors hold +1 or -1}}
func.func @f() attributes {a = #tq.rotation<kind = block_hadamard, dim = 8, block = 4, signs1 = [1, 1, 1, 1], signs2 = [1, 1, 1, 2]>} { return }

// -----

// expected-error @+1 {{haar rotation dim 0 is outside [1, 4096]}}
func.func @f() attributes {a = #tq.rotation<kind = haar, dim = 0>} { return }

// -----

// expected-error @+1 {{haar rotation takes a dim and a seed only}}
func.func @f() attributes {a = #tq.rotation<kind = haar, dim = 4, block = 2>} { return }

// -----

// expected-error @+1 {{haar rotation takes a dim and a seed only}}
func.func @f() attributes {a = #tq.rotation<kind = haar, dim = 4, signs2 = [1, 1, 1, 1]>} { return }

// -----

// expected-error @+2 {{expected ::mlir::tq::RotationKind to be one of: identity, hadamard, block_hadamard, haar}}
// expected-error @+1 {{failed to parse TQ_RotationAttr parameter 'kind'}}
func.func @f() attributes {a = #tq.rotation<kind = spin, dim = 4>} { return }

// -----

// expected-error @+1 {{struct is missing required parameter: kind}}
func.func @f() attributes {a = #tq.rotation<dim = 4>} { return }

// -----

// expected-error @+2 {{expected ::mlir::tq::LookupStrategy to be one of: select, lut, tile}}
// expected-error @+1 {{failed to parse TQ_LookupStrategyAttr parameter 'value'}}
func.func @f() attributes {a = #tq.lookup<fast>} { return }

// -----

// expected-error @+1 {{cache shape is tokens x kv_heads x head_dim, got 4 dimensions}}
func.func @f(%c: !tq.cache<8x2x2x128, #tq.format<"turbo3_0">>) { return }

// -----

// expected-error @+1 {{cache kv_heads must be a static positive size}}
func.func @f(%c: !tq.cache<8x0x128, #tq.format<"turbo3_0">>) { return }

// -----

// expected-error @+1 {{cache head_dim must be a static positive size}}
func.func @f(%c: !tq.cache<8x2x0, #tq.format<"turbo3_0">>) { return }

// -----

// The format library's limit on head dims.
// expected-error @+1 {{head dim 5000 is outside [1, 4096]}}
func.func @f(%c: !tq.cache<8x2x5000, #tq.format<"turbo3_0">>) { return }

// -----

// The second parameter must be a #tq.format.
// expected-error @+1 {{invalid kind of attribute specified}}
func.func @f(%c: !tq.cache<8x2x128, #tq.rotation<kind = identity, dim = 4>>) { return }

// -----

// expected-error @+1 {{expected ','}}
func.func @f(%c: !tq.cache<8x2x128>) { return }

// -----

//===----------------------------------------------------------------------===//
// Cache views and encoding (further cases)
//===----------------------------------------------------------------------===//

func.func @f(%b: tensor<3x8x50xi8>) {
  // expected-error @+1 {{'tq.from_bytes' op bytes tokens is 3, expected 4}}
  %c = tq.from_bytes %b : tensor<3x8x50xi8> -> !tq.cache<4x8x128, #tq.format<"turbo3_0">>
  return
}

// -----

func.func @f(%c: !tq.cache<4x8x128, #tq.format<"turbo3_0">>) {
  // expected-error @+1 {{'tq.to_bytes' op bytes tokens is 5, expected 4}}
  %b = tq.to_bytes %c : !tq.cache<4x8x128, #tq.format<"turbo3_0">> -> tensor<5x8x50xi8>
  return
}

// -----

func.func @f(%pool: tensor<?x16x8x50xi8>, %table: tensor<?xi64>, %n: index) {
  // Page tables hold i32 page numbers.
  // expected-error @+1 {{'tq.from_pages' op operand #1 must be 1D tensor of 32-bit signless integer values, but got 'tensor<?xi64>'}}
  %k = tq.from_pages %pool[%table], %n : tensor<?x16x8x50xi8>, tensor<?xi64> -> !tq.cache<?x8x128, #tq.format<"turbo3_0">>
  return
}

// -----

func.func @f(%x: tensor<16x2x80xf32>) {
  // expected-error @+1 {{'tq.quantize' op input tokens is 16, expected 8}}
  %c = tq.quantize %x : tensor<16x2x80xf32> -> !tq.cache<8x2x80, #tq.format<"polar3">>
  return
}

// -----

func.func @f(%x: tensor<16x4x80xf32>) {
  // expected-error @+1 {{'tq.quantize' op input kv heads is 4, expected 2}}
  %c = tq.quantize %x : tensor<16x4x80xf32> -> !tq.cache<16x2x80, #tq.format<"polar3">>
  return
}

// -----

func.func @f(%c: !tq.cache<16x2x80, #tq.format<"polar3">>) {
  // expected-error @+1 {{'tq.gather' op result tokens is 8, expected 16}}
  %g = tq.gather %c : !tq.cache<16x2x80, #tq.format<"polar3">> -> tensor<8x2x128xf32>
  return
}

// -----

func.func @f(%x: tensor<2x?xf32>) {
  // The rotated dimension must be static (it is the rotation's dim).
  // expected-error @+1 {{'tq.rotate' op last dimension is ?, the rotation acts on 4}}
  %r = tq.rotate %x {rotation = #tq.rotation<kind = identity, dim = 4>} : tensor<2x?xf32>
  return
}

// -----

func.func @f(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'tq.rotate' op requires the same type for all operands and results}}
  %r = "tq.rotate"(%x) {rotation = #tq.rotation<kind = identity, dim = 4>} : (tensor<2x4xf32>) -> tensor<1x4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Step-by-step attention (further cases)
//===----------------------------------------------------------------------===//

func.func @f(%q: tensor<1x8x64xf32>, %k: tensor<?x0x64xf32>) {
  // expected-error @+1 {{'tq.qk' op query heads (8) must be a multiple of kv heads (0)}}
  %s = tq.qk %q, %k : tensor<1x8x64xf32>, tensor<?x0x64xf32> -> tensor<1x8x?xf32>
  return
}

// -----

func.func @f(%q: tensor<1x8x64xf32>, %k: tensor<?x2x64xf32>) {
  // expected-error @+1 {{'tq.qk' op result queries is 2, expected 1}}
  %s = tq.qk %q, %k : tensor<1x8x64xf32>, tensor<?x2x64xf32> -> tensor<2x8x?xf32>
  return
}

// -----

func.func @f(%s: tensor<2x8x10xf32>) {
  // expected-error @+1 {{'tq.softmax' op requires attribute 'scale'}}
  %p = tq.softmax %s : tensor<2x8x10xf32> -> tensor<2x8x10xf32>
  return
}

// -----

func.func @f(%s: tensor<2x8x10xf32>) {
  // expected-error @+1 {{'tq.softmax' op scale must be finite and positive, got INF}}
  %p = tq.softmax %s {scale = 0x7F800000 : f32} : tensor<2x8x10xf32> -> tensor<2x8x10xf32>
  return
}

// -----

func.func @f(%s: tensor<2x8x10xf32>) {
  // expected-error @+1 {{'tq.softmax' op softcap must be finite and non-negative, got INF}}
  %p = tq.softmax %s {scale = 1.0 : f32, softcap = 0x7F800000 : f32} : tensor<2x8x10xf32> -> tensor<2x8x10xf32>
  return
}

// -----

func.func @f(%s: tensor<2x8x10xf32>) {
  // expected-error @+1 {{'tq.softmax' op softcap must be finite and non-negative, got nan}}
  %p = tq.softmax %s {scale = 1.0 : f32, softcap = 0x7FC00000 : f32} : tensor<2x8x10xf32> -> tensor<2x8x10xf32>
  return
}

// -----

func.func @f(%s: tensor<2x8x10xf32>, %m: tensor<3x10xf32>) {
  // expected-error @+1 {{'tq.softmax' op mask queries is 3, expected 2}}
  %p = tq.softmax %s mask(%m : tensor<3x10xf32>) {scale = 1.0 : f32} : tensor<2x8x10xf32> -> tensor<2x8x10xf32>
  return
}

// -----

func.func @f(%s: tensor<2x8x10xf32>, %sl: tensor<8xf32>) {
  // expected-error @+1 {{'tq.softmax' op slopes scale the mask, but there is no mask}}
  %p = tq.softmax %s slopes(%sl : tensor<8xf32>) {scale = 1.0 : f32} : tensor<2x8x10xf32> -> tensor<2x8x10xf32>
  return
}

// -----

func.func @f(%s: tensor<2x8x10xf32>, %m: tensor<2x10xf32>, %sl: tensor<4xf32>) {
  // expected-error @+1 {{'tq.softmax' op slopes (one per query head) is 4, expected 8}}
  %p = tq.softmax %s mask(%m : tensor<2x10xf32>) slopes(%sl : tensor<4xf32>) {scale = 1.0 : f32} : tensor<2x8x10xf32> -> tensor<2x8x10xf32>
  return
}

// -----

func.func @f(%s: tensor<2x8x10xf32>) {
  // expected-error @+1 {{'tq.softmax' op lse queries is 3, expected 2}}
  %p, %l = tq.softmax %s {scale = 1.0 : f32} : tensor<2x8x10xf32> -> tensor<2x8x10xf32>, tensor<3x8xf32>
  return
}

// -----

func.func @f(%p: tensor<1x8x10xf32>, %v: tensor<10x3x64xf32>) {
  // expected-error @+1 {{'tq.pv' op query heads (8) must be a multiple of kv heads (3)}}
  %o = tq.pv %p, %v : tensor<1x8x10xf32>, tensor<10x3x64xf32> -> tensor<1x8x64xf32>
  return
}

// -----

func.func @f(%p: tensor<1x8x10xf32>, %v: tensor<10x2x64xf32>) {
  // expected-error @+1 {{'tq.pv' op result queries is 2, expected 1}}
  %o = tq.pv %p, %v : tensor<1x8x10xf32>, tensor<10x2x64xf32> -> tensor<2x8x64xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Fused ops (further cases)
//===----------------------------------------------------------------------===//

func.func @f(%q: tensor<1x8x128xf32>, %k: !tq.cache<10x2x128, #tq.format<"turbo3_0">>) {
  // expected-error @+1 {{'tq.score' op result tokens is 9, expected 10}}
  %s = tq.score %q, %k : tensor<1x8x128xf32>, !tq.cache<10x2x128, #tq.format<"turbo3_0">> -> tensor<1x8x9xf32>
  return
}

// -----

func.func @f(%p: tensor<1x6x?xf32>, %v: !tq.cache<?x4x128, #tq.format<"polar2">>) {
  // expected-error @+1 {{'tq.accumulate' op query heads (6) must be a multiple of kv heads (4)}}
  %a = tq.accumulate %p, %v : tensor<1x6x?xf32>, !tq.cache<?x4x128, #tq.format<"polar2">> -> tensor<1x6x128xf32>
  return
}

// -----

func.func @f(%p: tensor<1x8x?xf32>, %v: !tq.cache<?x4x128, #tq.format<"polar2">>) {
  // expected-error @+1 {{'tq.accumulate' op result heads is 4, expected 8}}
  %a = tq.accumulate %p, %v : tensor<1x8x?xf32>, !tq.cache<?x4x128, #tq.format<"polar2">> -> tensor<1x4x128xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// tq.attention (further cases)
//===----------------------------------------------------------------------===//

func.func @f(%q: tensor<1x8x128xf32>, %k: !tq.cache<?x2x128, #tq.format<"turbo3_0">>, %v: !tq.cache<?x2x128, #tq.format<"turbo3_0">>) {
  // expected-error @+1 {{'tq.attention' op window must be non-negative, got -4}}
  %o = tq.attention %q, %k, %v {window = -4} : tensor<1x8x128xf32>, !tq.cache<?x2x128, #tq.format<"turbo3_0">>, !tq.cache<?x2x128, #tq.format<"turbo3_0">> -> tensor<1x8x128xf32>
  return
}

// -----

func.func @f(%q: tensor<1x8x128xf32>, %k: !tq.cache<?x2x128, #tq.format<"turbo3_0">>, %v: !tq.cache<?x2x128, #tq.format<"turbo3_0">>) {
  // expected-error @+1 {{'tq.attention' op softcap must be finite and non-negative, got -1.000000e+00}}
  %o = tq.attention %q, %k, %v {softcap = -1.0 : f32} : tensor<1x8x128xf32>, !tq.cache<?x2x128, #tq.format<"turbo3_0">>, !tq.cache<?x2x128, #tq.format<"turbo3_0">> -> tensor<1x8x128xf32>
  return
}

// -----

func.func @f(%q: tensor<1x8x128xf32>, %k: !tq.cache<?x2x128, #tq.format<"turbo3_0">>, %v: !tq.cache<?x2x128, #tq.format<"turbo3_0">>) {
  // expected-error @+1 {{'tq.attention' op scale must be finite and positive, got nan}}
  %o = tq.attention %q, %k, %v {scale = 0x7FC00000 : f32} : tensor<1x8x128xf32>, !tq.cache<?x2x128, #tq.format<"turbo3_0">>, !tq.cache<?x2x128, #tq.format<"turbo3_0">> -> tensor<1x8x128xf32>
  return
}

// -----

func.func @f(%q: tensor<1x8x128xf32>, %k: !tq.cache<10x2x128, #tq.format<"turbo3_0">>, %v: !tq.cache<10x2x128, #tq.format<"turbo3_0">>, %m: tensor<1x12xf32>) {
  // expected-error @+1 {{'tq.attention' op mask tokens is 12, expected 10}}
  %o = tq.attention %q, %k, %v mask(%m : tensor<1x12xf32>) : tensor<1x8x128xf32>, !tq.cache<10x2x128, #tq.format<"turbo3_0">>, !tq.cache<10x2x128, #tq.format<"turbo3_0">> -> tensor<1x8x128xf32>
  return
}

// -----

func.func @f(%q: tensor<1x8x128xf32>, %k: !tq.cache<?x2x128, #tq.format<"turbo3_0">>, %v: !tq.cache<?x2x128, #tq.format<"turbo3_0">>) {
  // expected-error @+1 {{'tq.attention' op result queries is 2, expected 1}}
  %o = tq.attention %q, %k, %v : tensor<1x8x128xf32>, !tq.cache<?x2x128, #tq.format<"turbo3_0">>, !tq.cache<?x2x128, #tq.format<"turbo3_0">> -> tensor<2x8x128xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Flash attention ops (further cases)
//===----------------------------------------------------------------------===//

func.func @f(%k: !tq.cache<?x2x128, #tq.format<"turbo3_0">>, %i: index) {
  // expected-error @+1 {{'tq.slice_tokens' op result '!tq.cache<?x4x128, #tq.format<"turbo3_0">>' must differ from the source '!tq.cache<?x2x128, #tq.format<"turbo3_0">>' in its token count only}}
  %t = tq.slice_tokens %k[%i, %i] : !tq.cache<?x2x128, #tq.format<"turbo3_0">> -> !tq.cache<?x4x128, #tq.format<"turbo3_0">>
  return
}

// -----

func.func @f(%k: !tq.cache<?x2x128, #tq.format<"turbo3_0">>, %i: index) {
  // expected-error @+1 {{'tq.slice_tokens' op result '!tq.cache<?x2x64, #tq.format<"turbo3_0">>' must differ from the source '!tq.cache<?x2x128, #tq.format<"turbo3_0">>' in its token count only}}
  %t = tq.slice_tokens %k[%i, %i] : !tq.cache<?x2x128, #tq.format<"turbo3_0">> -> !tq.cache<?x2x64, #tq.format<"turbo3_0">>
  return
}

// -----

func.func @f(%s: tensor<5x4x?xf32>, %m: tensor<1x4xf32>, %i: index) {
  // expected-error @+1 {{'tq.online_softmax' op max queries is 1, expected 5}}
  %p, %m1, %l1, %c = tq.online_softmax %s, %m, %m, %i, %i {scale = 1.0 : f32} : tensor<5x4x?xf32>, tensor<1x4xf32> -> tensor<5x4x?xf32>
  return
}

// -----

func.func @f(%s: tensor<1x4x?xf32>, %m: tensor<1x4xf32>, %l: tensor<1x?xf32>, %i: index) {
  // The running max and sum (and the new ones, and the correction) share
  // one type.
  // expected-error @+1 {{'tq.online_softmax' op failed to verify that all of {max, sum, new_max, new_sum, correction} have same type}}
  %p, %m1, %l1, %c = "tq.online_softmax"(%s, %m, %l, %i, %i) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 0>, scale = 1.0 : f32}> : (tensor<1x4x?xf32>, tensor<1x4xf32>, tensor<1x?xf32>, index, index) -> (tensor<1x4x?xf32>, tensor<1x4xf32>, tensor<1x4xf32>, tensor<1x4xf32>)
  return
}

// -----

func.func @f(%s: tensor<1x4x?xf32>, %m: tensor<1x4xf32>, %i: index) {
  // expected-error @+1 {{'tq.online_softmax' op window must be non-negative, got -1}}
  %p, %m1, %l1, %c = tq.online_softmax %s, %m, %m, %i, %i {scale = 1.0 : f32, window = -1} : tensor<1x4x?xf32>, tensor<1x4xf32> -> tensor<1x4x?xf32>
  return
}

// -----

func.func @f(%s: tensor<1x4x?xf32>, %m: tensor<1x4xf32>, %i: index) {
  // expected-error @+1 {{'tq.online_softmax' op softcap must be finite and non-negative, got -3.000000e+00}}
  %p, %m1, %l1, %c = tq.online_softmax %s, %m, %m, %i, %i {scale = 1.0 : f32, softcap = -3.0 : f32} : tensor<1x4x?xf32>, tensor<1x4xf32> -> tensor<1x4x?xf32>
  return
}

// -----

func.func @f(%s: tensor<1x4x8xf32>, %m: tensor<1x4xf32>, %mask: tensor<1x6xf32>, %i: index) {
  // The mask holds this tile's columns only.
  // expected-error @+1 {{'tq.online_softmax' op mask tokens is 6, expected 8}}
  %p, %m1, %l1, %c = tq.online_softmax %s, %m, %m, %i, %i mask(%mask : tensor<1x6xf32>) {scale = 1.0 : f32} : tensor<1x4x8xf32>, tensor<1x4xf32> -> tensor<1x4x8xf32>
  return
}

// -----

func.func @f(%s: tensor<1x4x?xf32>, %m: tensor<1x4xf32>, %mask: tensor<1x?xf32>, %sl: tensor<2xf32>, %i: index) {
  // expected-error @+1 {{'tq.online_softmax' op slopes (one per query head) is 2, expected 4}}
  %p, %m1, %l1, %c = tq.online_softmax %s, %m, %m, %i, %i mask(%mask : tensor<1x?xf32>) slopes(%sl : tensor<2xf32>) {scale = 1.0 : f32} : tensor<1x4x?xf32>, tensor<1x4xf32> -> tensor<1x4x?xf32>
  return
}

// -----

func.func @f(%a: tensor<1x4x128xf32>, %c: tensor<1x2xf32>) {
  // expected-error @+1 {{'tq.merge_tile' op correction heads is 2, expected 4}}
  %r = tq.merge_tile %a, %c, %a : tensor<1x4x128xf32>, tensor<1x2xf32>
  return
}

// -----

func.func @f(%a: tensor<1x4x128xf32>, %t: tensor<1x4x64xf32>, %c: tensor<1x4xf32>) {
  // expected-error @+1 {{'tq.merge_tile' op failed to verify that all of {acc, tile, result} have same type}}
  %r = "tq.merge_tile"(%a, %c, %t) : (tensor<1x4x128xf32>, tensor<1x4xf32>, tensor<1x4x64xf32>) -> tensor<1x4x128xf32>
  return
}

// -----

func.func @f(%a: tensor<1x4x128xf32>, %l: tensor<3x4xf32>) {
  // expected-error @+1 {{'tq.normalize' op sum queries is 3, expected 1}}
  %r = tq.normalize %a, %l : tensor<1x4x128xf32>, tensor<3x4xf32>
  return
}

// -----

func.func @f(%m: tensor<3x1x4xf32>, %a: tensor<3x2x4x128xf32>) {
  // expected-error @+1 {{'tq.combine' op acc queries is 2, expected 1}}
  %r = tq.combine %m, %m, %a : tensor<3x1x4xf32>, tensor<3x2x4x128xf32> -> tensor<1x4x128xf32>
  return
}

// -----

func.func @f(%m: tensor<3x1x4xf32>, %a: tensor<3x1x8x128xf32>) {
  // expected-error @+1 {{'tq.combine' op acc heads is 8, expected 4}}
  %r = tq.combine %m, %m, %a : tensor<3x1x4xf32>, tensor<3x1x8x128xf32> -> tensor<1x4x128xf32>
  return
}

// -----

func.func @f(%m: tensor<3x1x4xf32>, %a: tensor<3x1x4x128xf32>) {
  // expected-error @+1 {{'tq.combine' op result queries is 2, expected 1}}
  %r = tq.combine %m, %m, %a : tensor<3x1x4xf32>, tensor<3x1x4x128xf32> -> tensor<2x4x128xf32>
  return
}

// -----

func.func @f(%m: tensor<3x1x4xf32>, %a: tensor<3x1x4x128xf32>) {
  // expected-error @+1 {{'tq.combine' op result heads is 2, expected 4}}
  %r = tq.combine %m, %m, %a : tensor<3x1x4xf32>, tensor<3x1x4x128xf32> -> tensor<1x2x128xf32>
  return
}

// -----

func.func @f(%m: tensor<3x1x4xf32>, %l: tensor<2x1x4xf32>, %a: tensor<3x1x4x128xf32>) {
  // expected-error @+1 {{'tq.combine' op failed to verify that all of {max, sum} have same type}}
  %r = "tq.combine"(%m, %l, %a) : (tensor<3x1x4xf32>, tensor<2x1x4xf32>, tensor<3x1x4x128xf32>) -> tensor<1x4x128xf32>
  return
}

// -----

func.func @f(%idx: vector<4xi8>) {
  // expected-error @+1 {{'tq.lane_lookup' op operand #0 must be vector of 32-bit signless integer values of ranks 1, but got 'vector<4xi8>'}}
  %c = tq.lane_lookup %idx [0.0, 1.0] : vector<4xi8> -> vector<4xf32>
  return
}

// -----

func.func @f(%idx: vector<2x4xi32>) {
  // expected-error @+1 {{'tq.lane_lookup' op operand #0 must be vector of 32-bit signless integer values of ranks 1, but got 'vector<2x4xi32>'}}
  %c = tq.lane_lookup %idx [0.0, 1.0] : vector<2x4xi32> -> vector<2x4xf32>
  return
}

// -----

// A rotation is an f32 transform: integer (or f16) tensors are rejected by
// the verifier instead of failing later in the lowering with an
// unresolved materialization.
func.func @rotate_integers(%x: tensor<2x4xi32>) -> tensor<2x4xi32> {
  // expected-error @+1 {{'tq.rotate' op operand #0 must be ranked tensor of 32-bit float values}}
  %r = tq.rotate %x {rotation = #tq.rotation<kind = identity, dim = 4>} : tensor<2x4xi32>
  return %r : tensor<2x4xi32>
}

// -----

// tq.byte_lookup reads the low bits of an index: a table must have a
// power-of-two size (3 levels would leave index 3 undefined).
func.func @byte_lookup_three(%idx: vector<64xi8>) -> vector<64xi8> {
  // expected-error @+1 {{'tq.byte_lookup' op table needs a power of two from 1 to 16 entries, got 3}}
  %l = tq.byte_lookup %idx [1, 2, 3] : vector<64xi8>
  return %l : vector<64xi8>
}

// -----

// vpdpbusd sums four byte products per i32 lane: 64 bytes need 16 lanes.
func.func @byte_dot_lanes(%acc: vector<8xi32>, %a: vector<64xi8>) -> vector<8xi32> {
  // expected-error @+1 {{'tq.byte_dot' op needs four bytes per i32 lane, got 64 bytes for 8 lanes}}
  %d = tq.byte_dot %acc, %a, %a : vector<64xi8> -> vector<8xi32>
  return %d : vector<8xi32>
}

// -----

// vpermw reads five index bits: a word table has at most 32 entries.
func.func @word_lookup_large(%idx: vector<32xi16>) -> vector<32xi16> {
  // expected-error @+1 {{'tq.word_lookup' op table needs a power of two from 1 to 32 entries, got 64}}
  %l = tq.word_lookup %idx [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63] : vector<32xi16>
  return %l : vector<32xi16>
}

// -----

// A pair per 32-bit lane: 32 words need 16 lanes.
func.func @pair_dot_lanes(%acc: vector<8xi32>, %a: vector<32xi16>) -> vector<8xi32> {
  // expected-error @+1 {{'tq.pair_dot' op needs two words per 32-bit lane, got 32 words for 8 lanes}}
  %d = tq.pair_dot %acc, %a, %a : vector<32xi16> -> vector<8xi32>
  return %d : vector<8xi32>
}

// -----

// vdpbf16ps sums bf16 products in f32, vpdpwssd i16 products in i32: the
// accumulator's type follows the operands'.
func.func @pair_dot_types(%acc: vector<16xi32>, %a: vector<32xbf16>) -> vector<16xi32> {
  // expected-error @+1 {{'tq.pair_dot' op needs bf16 operands with an f32 accumulator or i16 operands with an i32 one}}
  %d = tq.pair_dot %acc, %a, %a : vector<32xbf16> -> vector<16xi32>
  return %d : vector<16xi32>
}

// -----

// `narrow` promises lhs bytes below 128 (AVX2's vpmaddubsw would saturate
// otherwise); a lookup table holding 0x80 or more breaks the promise.
func.func @byte_dot_narrow_wide_table(%acc: vector<16xi32>, %idx: vector<64xi8>, %q: vector<64xi8>) -> vector<16xi32> {
  %l = tq.byte_lookup %idx [1, 127, -128, 64] : vector<64xi8>
  // expected-error @+1 {{'tq.byte_dot' op is narrow (lhs bytes below 128), but its lhs looks up the byte 128}}
  %d = tq.byte_dot %acc, %l, %q {narrow} : vector<64xi8> -> vector<16xi32>
  return %d : vector<16xi32>
}

// -----

// tq.select_bits picks its fields inside 64-bit lanes: the source must
// hold whole lanes.
func.func @select_bits_partial_lane(%x: vector<12xi8>) -> vector<12xi8> {
  // expected-error @+1 {{'tq.select_bits' op needs whole 64-bit lanes, got 12 bytes}}
  %f = tq.select_bits %x [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0] : vector<12xi8>
  return %f : vector<12xi8>
}

// -----

// One offset per result byte.
func.func @select_bits_offsets(%x: vector<8xi8>) -> vector<8xi8> {
  // expected-error @+1 {{'tq.select_bits' op needs one offset per byte, got 4 for 8 bytes}}
  %f = tq.select_bits %x [0, 2, 4, 6] : vector<8xi8>
  return %f : vector<8xi8>
}

// -----

// An offset names a bit of the lane: 64 is past it (vpmultishiftqb would
// read it modulo 64; the op does not promise that).
func.func @select_bits_offset_range(%x: vector<8xi8>) -> vector<8xi8> {
  // expected-error @+1 {{'tq.select_bits' op offsets are bits of a 64-bit lane (0 to 63), got 64}}
  %f = tq.select_bits %x [0, 8, 16, 24, 32, 40, 48, 64] : vector<8xi8>
  return %f : vector<8xi8>
}
