model t
config tiny { dim = 4, n = 2 }
param w : f32[dim, dim]
fn f(x: f32[S, dim]) -> f32[S, dim] {
  return linear(x, w) + undefined_name
}
graph g(x: f32[3, dim]) -> (y: f32[3, dim]) {
  a = f(x)
  return f(a)
}
