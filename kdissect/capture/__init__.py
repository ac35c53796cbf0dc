"""Bytes from the outside world: capture files and packets -> ordered TCP byte streams."""
