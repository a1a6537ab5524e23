model t
config tiny { dim = 4, n = 2 }
param w : f32[dim]
graph g(x: f32[dim]) -> (y: f32[dim]) {
  h = rms_norm(x, dmi, eps = 1e-5)
  return h
}
