compile models/minimax_h3.g --config tiny --enable-pass cache-dit -o @TMP@/x.plan
