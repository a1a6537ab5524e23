compile models/minimax_h3.g --config tiny --int8=rotate=128 -o @TMP@/x.plan
