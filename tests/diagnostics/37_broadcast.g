model t
config tiny { dim = 4, n = 2 }
graph g(x: f32[5, dim], z: f32[3]) -> (y: f32[5, dim]) {
  return x + z
}
