"""The load test under concurrency: the cost-versus-accuracy runner, its report and locust file
(``make loadtest``), the chaos suite (``make chaos``) and the OptiLLM comparison."""
