model t
config tiny { dim = 4, n = 2 }
graph g(x: bf16[dim]) -> (y: bf16[dim]) {
  repeat i in n {
    x = f32(x)
  }
  return x
}
