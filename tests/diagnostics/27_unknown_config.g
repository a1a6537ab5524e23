# args: --config tny
model t
config full { dim = 8 }
config tiny { dim = 4 }
