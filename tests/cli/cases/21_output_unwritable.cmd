compile models/minimax_h3.g --config tiny --no-kernels -o /nonexistent-dir/x.plan
