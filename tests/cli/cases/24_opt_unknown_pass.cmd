opt tests/passes/dce_chains.ir --passes bogus-pass
