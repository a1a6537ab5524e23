model t
config tiny { dim = 4, n = 2 }
fn f(x: f32[dim]) -> f32[dim] { return x }
fn f(x: f32[dim]) -> f32[dim] { return exp(x) }
graph g(x: f32[dim]) -> (y: f32[dim]) { return f(x) }
