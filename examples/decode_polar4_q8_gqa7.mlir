// Decode with asymmetric K/V: 4-bit PolarQuant keys (head dim 96, padded to
// 128 for the WHT) and q8_0 values; 14 query heads over 2 KV heads.
func.func @decode(%q: tensor<1x14x96xf32>, %kb: tensor<?x2x66xi8>, %vb: tensor<?x2x102xi8>) -> tensor<1x14x96xf32> {
  %k = tq.from_bytes %kb : tensor<?x2x66xi8> -> !tq.cache<?x2x96, #tq.format<"polar4">>
  %v = tq.from_bytes %vb : tensor<?x2x102xi8> -> !tq.cache<?x2x96, #tq.format<"q8_0">>
  %o = tq.attention %q, %k, %v : tensor<1x14x96xf32>, !tq.cache<?x2x96, #tq.format<"polar4">>, !tq.cache<?x2x96, #tq.format<"q8_0">> -> tensor<1x14x96xf32>
  return %o : tensor<1x14x96xf32>
}
