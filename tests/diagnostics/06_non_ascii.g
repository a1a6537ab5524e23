model t
config tiny { dim = 4, n = 2 }
let café = 3
