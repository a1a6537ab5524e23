model t
config full { dim = 8, n = 4, ffn = 16 }
config tiny { dim = 4, n = 2 }
