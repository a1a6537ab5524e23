model t
config tiny { dim = 4, n = 2 }
param w : f32[dim]
param w : f32[dim, dim]
