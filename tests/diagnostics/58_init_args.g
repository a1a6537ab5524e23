model t
config tiny { dim = 4, n = 2 }
param w : f32[dim] init normal(std = 0.1, fan_in = 4)
param v : f32[dim] init normall(std = 0.1)
