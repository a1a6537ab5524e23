compile models/minimax_h3.g --config tiny --enable-pass int8-lowerin -o @TMP@/x.plan
