"""The pure library of calibration and accuracy measurement: no process, network or model runs
here (the verbs that drive a stack are :mod:`calibration`; the load test is :mod:`loadtests`).

One folder per stage, in the order the data flows, each importing only the stages before it:

- :mod:`~evaluation.problems`: benchmark problems, their checkers and the calibration problem
  set with its disjoint calibration and development splits, and the sealed test split;
- :mod:`~evaluation.pools`: candidate pools drawn once per problem, stored in chunks, and the
  provenance every raw result carries;
- :mod:`~evaluation.pricing`: every configuration priced offline from a pool (sample once, price
  many), the cascade onto a larger model, and the live requests that stand for priced ones;
- :mod:`~evaluation.routing`: the routing table fitted on priced calibration pools, with live
  and cascade configurations joined in, and learned routers measured beside it;
- :mod:`~evaluation.heldout`: the fitted ladder scored on problems the fit never saw (the
  development split's pools and through the gateway, leave one family out, the sealed split),
  its Must-show checks, the simulator check and the escalation report;
- :mod:`~evaluation.confidence`: the calibrated confidence fitted and measured on pools;
- :mod:`~evaluation.report`: the load test's records and cost-versus-accuracy report, and the
  cost-vs-accuracy frontier.
- :mod:`~evaluation.training`: pools (and opted-in served traces) exported as fine-tuning rows,
  preference pairs and outcome labels, never a development or sealed problem.

Below them all, :mod:`~evaluation.stats`: the 95% intervals, the accuracy ledger and calibration
metrics every stage reports with.
"""
