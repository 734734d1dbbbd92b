// The uncompressed baseline: f16 keys and values, head dim 256, no GQA.
func.func @decode(%q: tensor<1x4x256xf32>, %kb: tensor<?x4x512xi8>, %vb: tensor<?x4x512xi8>) -> tensor<1x4x256xf32> {
  %k = tq.from_bytes %kb : tensor<?x4x512xi8> -> !tq.cache<?x4x256, #tq.format<"f16">>
  %v = tq.from_bytes %vb : tensor<?x4x512xi8> -> !tq.cache<?x4x256, #tq.format<"f16">>
  %o = tq.attention %q, %k, %v : tensor<1x4x256xf32>, !tq.cache<?x4x256, #tq.format<"f16">>, !tq.cache<?x4x256, #tq.format<"f16">> -> tensor<1x4x256xf32>
  return %o : tensor<1x4x256xf32>
}
