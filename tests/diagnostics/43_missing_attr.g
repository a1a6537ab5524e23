model t
config tiny { dim = 4, n = 2 }
param w : f32[dim]
graph g(x: f32[dim]) -> (y: f32[dim]) {
  return rms_norm(x, w)
}
