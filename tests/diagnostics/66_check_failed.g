model t
config tiny { dim = 6, heads = 4 }
check heads >= 1, "heads at least 1"
check dim % heads == 0, "dim splits into heads of equal width"
let head_dim = dim / heads
param w : f32[dim, head_dim, 1.5]
