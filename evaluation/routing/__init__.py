"""Stage 4, routing: the routing table fitted on priced calibration pools. Per task type, effort
and difficulty bin, the configuration with the best accuracy within the effort's budget, chosen
so noise does not pick it; the zero-token difficulty estimator and its bins; live tree strategies
and cascades joined in where they were measured and imputed elsewhere; and learned routers
measured against the table. The shared types of every later stage live in :mod:`~.types`."""
