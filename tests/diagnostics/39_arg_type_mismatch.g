model t
config tiny { dim = 4, n = 2 }
fn f(x: bf16[S, dim]) -> bf16[S, dim] { return x }
graph g(x: bf16[5, 3]) -> (y: bf16[5, 3]) {
  return f(x)
}
