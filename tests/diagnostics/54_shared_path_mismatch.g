model t
config tiny { dim = 4, n = 2 }
params layers[0 .. 1] as dense {
  norm.weight : f32[dim]
}
params layers[1 .. n] as sparse {
  norm.weight : f32[2 * dim]
}
