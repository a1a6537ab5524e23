model t
config tiny { dim = 4, n = 2 }
let a = (n - 5) / 2
