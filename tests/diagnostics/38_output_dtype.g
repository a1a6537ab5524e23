model t
config tiny { dim = 4, n = 2 }
graph g(x: bf16[5, dim]) -> (y: f32[5, dim]) {
  return exp(x)
}
