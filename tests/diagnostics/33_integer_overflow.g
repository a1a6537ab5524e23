model t
config tiny { dim = 4, n = 2 }
let big = 4611686018427387904 * dim
