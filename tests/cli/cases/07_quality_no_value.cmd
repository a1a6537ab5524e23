compile models/minimax_h3.g -o @TMP@/x.plan --quality
