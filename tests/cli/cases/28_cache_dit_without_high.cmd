compile models/minimax_h3.g --config tiny --cache-dit-threshold 0.1 -o @TMP@/x.plan
