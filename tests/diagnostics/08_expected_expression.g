model t
config tiny { dim = 4, n = 2 }
graph g(x: f32[dim]) -> (y: f32[dim]) {
  y = * x
  return y
}
