compile models/minimax_h3.g --config tiny --spectrum=11:5 --spectrum-degree 9 -o @TMP@/x.plan
