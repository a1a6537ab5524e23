graph models/minimax_h3.g --format svg
