model t
config tiny { dim = 4, n = 2 }
let dim = 8
