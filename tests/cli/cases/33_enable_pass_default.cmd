compile models/minimax_h3.g --config tiny --enable-pass dce --no-kernels -o @TMP@/x.plan
