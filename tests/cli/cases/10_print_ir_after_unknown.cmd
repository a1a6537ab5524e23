compile models/minimax_h3.g --config tiny --print-ir-after=dcee -o @TMP@/x.plan
