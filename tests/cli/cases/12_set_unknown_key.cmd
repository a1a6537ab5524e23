check models/minimax_h3.g --set dmi=64
