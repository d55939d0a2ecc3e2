"""The statistics every stage reports with: one definition of each 95% interval (Wilson, and the
bootstrap over problems never narrower than Wilson), the accuracy ledger (pass@1, pass@k, maj@k,
selected, coverage; errors apart, never wrong) and calibration metrics (ECE, Brier, log loss)."""
