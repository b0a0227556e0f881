"""Reading and writing runs and qrels."""
