model t
config tiny { dim = 6 }
let scale = 0.5
check dim * scale >= 1, "the sides are integers"
