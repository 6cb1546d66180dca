"""Processes we start: one objective call under a time limit, children that end with their parent, remote hooks."""
