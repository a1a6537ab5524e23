model t
config tiny { dim = 4, n = 2 }
param w : bf16[dim, 3]
graph g(x: bf16[5, dim]) -> (y: bf16[5, dim]) {
  return linear(x, w)
}
