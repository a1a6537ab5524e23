check models/minimax_h3.g --set dim=abc
