model t
config tiny { dim = 4, n = 2 }
params blocks[n] {
  w : f32[dim]
}
graph g(x: f32[dim]) -> (y: f32[dim]) {
  return x * blocks[5].w
}
