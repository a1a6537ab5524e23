model t
config tiny { dim = 4, dim = 8 }
