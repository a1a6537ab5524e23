compile models/minimax_h3.g --config tiny --int8=max_row=4 -o @TMP@/x.plan
