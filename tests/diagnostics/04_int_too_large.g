model t
config tiny { dim = 4, n = 2 }
let a = 99999999999999999999
