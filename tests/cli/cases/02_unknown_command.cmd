compiel models/minimax_h3.g
