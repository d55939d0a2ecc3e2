"""Cost-versus-accuracy load tests: the runner, report, calibration and locust file."""
