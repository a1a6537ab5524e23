model t
config full { dim = 8, n = 4 }
config tiny { dim = 4, n = 2, extra = 1 }
