"""The calibration pipeline that drives a running stack: ``python -m calibration <verb>``.

Sample once, price many: candidate pools are drawn through the real policy and sandbox services,
scored by the verifier's judges, priced offline, and the routing table fitted on calibration
pools and scored on the development split's (looked at during development), on left-out
families and on the sealed test split; live runs through the gateway check the prices and measure
what pools cannot price. The verbs (:mod:`calibration.verbs`, listed by ``python -m calibration
--help``) are the command line; :mod:`calibration.lib` holds what they share that starts
processes or talks to services; everything pure lives in :mod:`evaluation`.
"""
