"""What the calibration verbs share that drives a running stack or reads its records: the
services a pool is drawn through and the model lock, the drawer and the pool run, the judges,
the routing fit as the verbs run it, routes predicted as the gateway chooses them, the live runs'
records, replies and grading sandbox, and the local stack they go through."""
