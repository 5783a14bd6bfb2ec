"""tools/bench-cloud's load model and its open-loop replay (issue 50)."""
