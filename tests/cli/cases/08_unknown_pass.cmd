compile models/minimax_h3.g --config tiny --passes dce,memory-plann -o @TMP@/x.plan
