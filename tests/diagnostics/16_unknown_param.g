model t
config tiny { dim = 4, n = 2 }
param proj.weight : f32[dim, dim]
graph g(x: f32[3, dim]) -> (y: f32[3, dim]) {
  return linear(x, proj.wieght)
}
