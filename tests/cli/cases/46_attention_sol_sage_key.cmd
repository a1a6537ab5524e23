compile models/minimax_h3.g --config tiny --attention sol,pv=bf16 -o @TMP@/x.plan
