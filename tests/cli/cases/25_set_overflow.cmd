check models/minimax_h3.g --set dim=99999999999999999999
