model t
config tiny { dim = 4, n = 2 }
weights w : f32[dim]
let ok = 3
let bad = )
