compile models/minimax_h3.g --quality hihg -o @TMP@/x.plan
