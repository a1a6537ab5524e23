model t
config tiny { dim = 4, n = 2 }
graph g(x: f32[6, dim]) -> (y: f32[3, dim]) {
  a, b = split(x, 3, axis = 0)
  return a
}
