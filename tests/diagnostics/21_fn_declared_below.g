model t
config tiny { dim = 4, n = 2 }
graph g(x: f32[dim]) -> (y: f32[dim]) {
  return late(x)
}
fn late(x: f32[dim]) -> f32[dim] { return exp(x) }
