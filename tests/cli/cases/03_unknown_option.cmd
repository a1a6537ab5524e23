compile models/minimax_h3.g --bogus -o @TMP@/x.plan
