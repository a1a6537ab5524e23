compile models/minimax_h3.g --config tiny --attention sol,dense_layers=-1 -o @TMP@/x.plan
