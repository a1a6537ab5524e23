model t
config tiny { dim = 4 }
graph g(x: f32[dim]) -> (y: f32[dim]) {
  a = ceildiv(x, 2)
  b = split(x, 2, ax = 0)
  c = rms_norm(eps = 1e-5, x)
  d = x[9]
  return x
}
