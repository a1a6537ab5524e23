compile models/minimax_h3.g --config tiny --attention sol,dense_backend=sol -o @TMP@/x.plan
