model t
config tiny { dim = 4, eps = 1e-5 }
