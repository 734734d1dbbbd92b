// Causal prefill of 16 tokens with a 64-token sliding window: tq3_0 keys
// (block WHT32), turbo2_0 values (head dim 64, padded to 128), 16 query
// heads over 4 KV heads.
func.func @prefill(%q: tensor<16x16x64xf32>, %kb: tensor<?x4x28xi8>, %vb: tensor<?x4x34xi8>) -> tensor<16x16x64xf32> {
  %k = tq.from_bytes %kb : tensor<?x4x28xi8> -> !tq.cache<?x4x64, #tq.format<"tq3_0">>
  %v = tq.from_bytes %vb : tensor<?x4x34xi8> -> !tq.cache<?x4x64, #tq.format<"turbo2_0">>
  %o = tq.attention %q, %k, %v {causal, window = 64} : tensor<16x16x64xf32>, !tq.cache<?x4x64, #tq.format<"tq3_0">>, !tq.cache<?x4x64, #tq.format<"turbo2_0">> -> tensor<16x16x64xf32>
  return %o : tensor<16x16x64xf32>
}
