model t
config tiny { dim = 4 }
graph g(x: f32[dim], x: f32[dim]) -> (y: f32[dim], y: f32[dim]) {
  return x, x
}
graph h(x: f32[dim]) -> (y: f32[dim]) {
  return x
}
program p(x: f32[dim]) -> (y: f32[dim]) {
  y = h(x, x)
  return y
}
