compile models/minimax_h3.g --config tiny --attention flash -o @TMP@/x.plan
