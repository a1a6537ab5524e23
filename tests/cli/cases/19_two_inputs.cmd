check models/minimax_h3.g models/minimax_m3_1.g
