// Decode step: one query token, 32 query heads over 8 KV heads (GQA group
// 4), head dim 128, turbo3_0 keys and values (the TheTom fork's format),
// any context length.
func.func @decode(%q: tensor<1x32x128xf32>, %kb: tensor<?x8x50xi8>, %vb: tensor<?x8x50xi8>) -> tensor<1x32x128xf32> {
  %k = tq.from_bytes %kb : tensor<?x8x50xi8> -> !tq.cache<?x8x128, #tq.format<"turbo3_0">>
  %v = tq.from_bytes %vb : tensor<?x8x50xi8> -> !tq.cache<?x8x128, #tq.format<"turbo3_0">>
  %o = tq.attention %q, %k, %v : tensor<1x32x128xf32>, !tq.cache<?x8x128, #tq.format<"turbo3_0">>, !tq.cache<?x8x128, #tq.format<"turbo3_0">> -> tensor<1x32x128xf32>
  return %o : tensor<1x32x128xf32>
}
