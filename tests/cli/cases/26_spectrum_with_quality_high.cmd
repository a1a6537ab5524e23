compile models/minimax_h3.g --config tiny --spectrum=11:5:1.0 --quality high -o @TMP@/x.plan
