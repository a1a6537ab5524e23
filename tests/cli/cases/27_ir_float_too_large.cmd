opt tests/ir/corpus/float_too_large.ir
