model t
config tiny { dim = 4, n = 2 }
let a = dim / (dim - 4)
