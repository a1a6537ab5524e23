# a group sharing a path with a group whose field failed (regression: UB in sema)
model dup
config c { n = 2, d = 4 }
params layers[0 .. n] as a {
  w : f32[d] init bogus(value = 1.0)
}
params layers[n .. 2 * n] as b {
  w : f32[d] init const(value = 1.0)
}
graph g(x: f32[d]) -> (y: f32[d]) {
  return x
}
