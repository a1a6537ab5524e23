compile models/minimax_h3.g --config tiny --enable-pass int8-lowering --passes dce -o @TMP@/x.plan
