opt tests/ir/corpus/tensor_too_large.ir
