model t
config tiny { dim = 4, n = 0 - 1 }
let r = 7 % 2.0
graph g(x: f32[dim]) -> (y: f32[dim]) {
  repeat i in n { x = exp(x) }
  return x
  y = x
}
graph h(x: f32[dim]) -> (y: f32[dim]) {
  return 3
}
