compile models/minimax_h3.g --config tiny --attention sage,pv=fp4 -o @TMP@/x.plan
