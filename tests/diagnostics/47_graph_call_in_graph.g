model t
config tiny { dim = 4, n = 2 }
graph a(x: f32[dim]) -> (y: f32[dim]) { return exp(x) }
graph b(x: f32[dim]) -> (y: f32[dim]) {
  return a(x)
}
