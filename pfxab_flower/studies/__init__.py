"""Built on runs: comparisons of algorithms, and calibration of the smoothness settings on a site's objective."""
