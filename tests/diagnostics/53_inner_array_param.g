model t
config tiny { dim = 4, n = 2 }
param experts[n].w : f32[dim]
