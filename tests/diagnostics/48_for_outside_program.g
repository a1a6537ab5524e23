model t
config tiny { dim = 4, n = 2 }
graph g(x: f32[dim]) -> (y: f32[dim]) {
  for k in n { x = exp(x) }
  return x
}
