check models/minimax_m3_1.g --config tiny
