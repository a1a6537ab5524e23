compile models/minimax_h3.g --config tiny --enable-pass row-split -o @TMP@/x.plan
