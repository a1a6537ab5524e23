model t
config tiny { dim = 4, n = 2 }
graph g(x: f32[5, dim]) -> (y: f32[5, 2]) {
  a, b, c = split(x, 3)
  return a
}
