compile models/minimax_h3.g --config tiny --attention sol,dense_layers=3 -o @TMP@/x.plan
