// Prefill of 8 tokens with logit soft-capping and an additive mask:
// TurboQuant_prod keys (2-bit + QJL residual, head dim 160 padded to 256)
// and dense-Haar 4-bit values, 8 query heads over 8 KV heads.
func.func @prefill(%q: tensor<8x8x160xf32>, %kb: tensor<?x8x100xi8>, %vb: tensor<?x8x164xi8>, %mask: tensor<8x?xf32>) -> tensor<8x8x160xf32> {
  %k = tq.from_bytes %kb : tensor<?x8x100xi8> -> !tq.cache<?x8x160, #tq.format<"tqprod3">>
  %v = tq.from_bytes %vb : tensor<?x8x164xi8> -> !tq.cache<?x8x160, #tq.format<"haar4">>
  %o = tq.attention %q, %k, %v mask(%mask : tensor<8x?xf32>) {causal, softcap = 30.0 : f32} : tensor<8x8x160xf32>, !tq.cache<?x8x160, #tq.format<"tqprod3">>, !tq.cache<?x8x160, #tq.format<"haar4">> -> tensor<8x8x160xf32>
  return %o : tensor<8x8x160xf32>
}
