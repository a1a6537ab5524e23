compile models/minimax_h3.g --config tiny --attention sol,dense_steps=50 -o @TMP@/x.plan
