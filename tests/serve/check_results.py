"""check_results.py: reads the sample results file of `serve_test_results --write FILE` with
Python's json module (an independent JSON parser) and checks each line's fields.
usage: check_results.py SERVE_TEST_RESULTS OUT_FILE"""
import json
import subprocess
import sys

exe, out = sys.argv[1], sys.argv[2]
subprocess.run([exe, "--write", out], check=True)
with open(out, "rb") as f:
    raw = f.read()
lines = raw.decode("utf-8").split("\n")
assert lines[-1] == "", "the file ends with a newline"
rows = [json.loads(line) for line in lines[:-1]]
keys = ["id", "tokens", "finish_reason", "prompt_len", "ttft_ms", "tpot_ms", "itl_ms"]
for r in rows:
    assert list(r)[:7] == keys, list(r)
assert rows[0]["id"] == 'a"b\\c\n\x01\x7f\u00e9\U0001F600/'
assert rows[0]["tokens"] == [1, 2, 3] and rows[0]["finish_reason"] == "length"
assert rows[0]["ttft_ms"] == 10.0 and rows[0]["tpot_ms"] == 15.0
assert rows[0]["itl_ms"] == [10.0, 20.0]
assert rows[1]["id"] == 7 and rows[1]["tpot_ms"] is None and rows[1]["itl_ms"] == []
assert rows[2]["id"] == "x\ufffd\ufffd" and rows[2]["error"] == 'boom "q"\t'
assert rows[2]["ttft_ms"] is None and rows[2]["itl_ms"] is None
assert rows[3]["id"] == "12x"
assert rows[4]["id"] is None and rows[4]["prompt_len"] is None
assert rows[4]["error"] == 'r.jsonl:2:5: missing "id"'
assert len(rows) == 5
print("check_results: %d lines read back by Python's json" % len(rows))
