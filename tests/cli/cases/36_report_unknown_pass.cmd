compile models/minimax_h3.g --config tiny --report=memory-plam -o @TMP@/x.plan
