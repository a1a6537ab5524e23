model t
config tiny { dim = 4, n = 2 }
params blocks[n] {
  w : f32[dim]
}
fn f(x: f32[dim], p: blocks) -> f32[dim] { return x * p.w }
graph g(x: f32[dim]) -> (y: f32[dim]) {
  return f(x, x)
}
