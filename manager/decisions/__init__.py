"""The manager's pure decisions (dispatch scoring, status mapping): plain data in, plain data out."""
