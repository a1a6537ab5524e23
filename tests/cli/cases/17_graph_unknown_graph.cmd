graph models/minimax_h3.g --config tiny --format dot --graph stepp
