"""What a run is: every parameter declared once, the checked run configuration, the spec sent to clients."""
