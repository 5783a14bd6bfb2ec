"""One module per REST resource; each function is one URL and method."""
