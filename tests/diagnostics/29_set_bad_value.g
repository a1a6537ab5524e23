# args: --config tiny --set dim=x
model t
config full { dim = 8 }
config tiny { dim = 4 }
