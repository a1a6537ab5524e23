model t
config tiny { dim = 4, n = 2 }
fn f(x: f32[dim]) f32[dim] {
  return x
}
