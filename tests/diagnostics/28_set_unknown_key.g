# args: --config tiny --set dmi=8
model t
config full { dim = 8 }
config tiny { dim = 4 }
