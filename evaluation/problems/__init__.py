"""Stage 1, problems: benchmark data sets with a stable content id and a hashed split, so a
problem can never be on the calibration side of one run and the development side of another; the
checkers that decide whether an answer is right (the project's one equivalence test, code by its
hidden tests in the sandbox); and the calibration problem set, many families over several task
kinds, interleaved so any prefix covers them all."""
