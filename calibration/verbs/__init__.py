"""One module per verb of ``python -m calibration``: ``NAME``, ``HELP``, ``add_arguments`` and
``run``, registered in :data:`calibration.cli.VERBS`. A verb never imports another."""
