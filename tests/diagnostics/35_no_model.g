config tiny { dim = 4 }
param w : f32[dim]
