# tensors past h3's 2^48-byte limit: element counts that fit 64 bits but whose bytes do not,
# a stacked group parameter, and a constant's shape
model big
config c { n = 2147483648, g = 65536, d = 16777216 }
param w : bf16[n, n] init uniform(bound = 1.0)
params layers[g] as l {
  v : f32[d, 1024] init uniform(bound = 1.0)
}
graph f(x: f32[4]) -> (y: f32[4]) {
  z = zeros(f32, [d, d])
  return x
}
