compile models/minimax_m3_1.g --config tiny --attention sage -o @TMP@/x.plan
