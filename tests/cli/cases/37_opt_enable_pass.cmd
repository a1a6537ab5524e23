opt tests/passes/dce_chains.ir --enable-pass int8-lowering
