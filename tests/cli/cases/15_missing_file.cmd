check models/nope.g
