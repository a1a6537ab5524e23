model t
config tiny { dim = 4, n = 2 }
param w : bf61[dim]
