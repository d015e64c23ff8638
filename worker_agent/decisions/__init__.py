"""The agent's pure decisions (local admission, capacity report contents): plain data in, plain data out."""
