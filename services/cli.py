"""``ttc``: start one service, or the whole local stack, from one entry point.

``ttc serve <service>`` runs a single service in the foreground (what a container runs);
``ttc stack`` starts every service as its own process on the embedded default and stops them
together. Each service module exposes ``main()``; this file only dispatches.
"""

from __future__ import annotations

import argparse
import importlib
import sys

SERVICES: dict[str, str] = {
    "policy": "services.policy.server",
    "verifier": "services.verifier.server",
    "sandbox": "services.sandbox.server",
    "orchestrator": "services.orchestrator.server",
    "gateway": "services.gateway.server",
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="ttc", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run one service in the foreground")
    serve.add_argument("service", choices=sorted(SERVICES))
    sub.add_parser("stack", help="run every service locally until interrupted")
    args = parser.parse_args(argv)
    if args.command == "serve" and args.service == "gateway":
        # Composition point: the gateway imports nothing from the orchestrator; it is handed the
        # orchestrator's full job validation here, so a bad pinned strategy is refused (400)
        # before anything is enqueued (services/jobs/validation.py explains the hook).
        from services.search.run import validate_job

        importlib.import_module(SERVICES["gateway"]).main(validate_job)
    elif args.command == "serve":
        importlib.import_module(SERVICES[args.service]).main()
    else:
        from services.stack import run_stack

        sys.exit(run_stack())


if __name__ == "__main__":
    main()
