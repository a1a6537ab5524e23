model t
config tiny { dim = 4, n = 2 }
graph g() -> (y: f32[dim]) {
  y = randn(shape = [dim], stream = "noise)
  return y
}
