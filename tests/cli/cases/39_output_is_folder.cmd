compile models/minimax_h3.g --config tiny --no-kernels -o models
