opt /nonexistent-dir/none.ir --passes dce
