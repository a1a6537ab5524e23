compile models/minimax_h3.g --config tiny --attention sage,dense_steps=3 -o @TMP@/x.plan
