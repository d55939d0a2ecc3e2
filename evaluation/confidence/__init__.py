"""Stage 6, confidence: the calibrated ``ttc.confidence`` fitted and measured on pools. Training
rows are replays of the priced configurations with the signals the search ends with, each
prompt's prior out of fold; the model's kind is chosen by grouped cross-validation; the report
measures it on the development split's pools, and a routed run's served confidence is replayed
offline."""
