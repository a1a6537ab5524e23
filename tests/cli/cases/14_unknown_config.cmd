check models/minimax_h3.g --config huge
