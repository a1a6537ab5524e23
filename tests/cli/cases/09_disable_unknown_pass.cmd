compile models/minimax_h3.g --config tiny --disable-pass fusion -o @TMP@/x.plan
