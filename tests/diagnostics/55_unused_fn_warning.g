model t
config tiny { dim = 4, n = 2 }
fn helper(x: f32[dim]) -> f32[dim] { return exp(x) }
graph g(x: f32[dim]) -> (y: f32[dim]) {
  return x * unknown
}
