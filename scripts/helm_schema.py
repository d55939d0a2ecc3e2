"""Write helm/ttc/values.schema.json from one description of the chart's values.

Every component shares the same sub-keys (enabled, image, replicas, resources, env,
nodeSelector, tolerations, affinity, podAnnotations, autoscaling, pdb); writing the schema by
hand would repeat them six times and drift. Components are closed objects
(``additionalProperties: false``), so a misspelt key fails ``helm lint`` instead of being
ignored silently.

Usage: ``python scripts/helm_schema.py`` (write) or ``--check`` (fail if the file is stale).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_PATH = ROOT / "helm" / "ttc" / "values.schema.json"
sys.path.insert(0, str(ROOT))
from services.policy.engines import ENGINE_MODULES  # noqa: E402  (stdlib only: no engine is imported)

Schema = dict[str, Any]


def obj(properties: Schema, required: list[str] | None = None, *, closed: bool = True) -> Schema:
    """An object schema; closed objects reject unknown keys."""
    out: Schema = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    if closed:
        out["additionalProperties"] = False
    return out


STR: Schema = {"type": "string"}
BOOL: Schema = {"type": "boolean"}
NONEMPTY: Schema = {"type": "string", "minLength": 1}
PORT_INT: Schema = {"type": "integer", "minimum": 1, "maximum": 65535}
QUANTITY: Schema = {"type": ["string", "integer", "number"]}
STRING_MAP: Schema = {"type": "object", "additionalProperties": {"type": "string"}}
ENV_MAP: Schema = {
    "type": "object",
    "description": "Extra environment variables, name -> value; they override the chart's wiring.",
    "propertyNames": {"pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
    "additionalProperties": {"type": ["string", "number", "integer", "boolean"]},
}
RESOURCES: Schema = obj(
    {
        "requests": {"type": "object", "additionalProperties": QUANTITY},
        "limits": {"type": "object", "additionalProperties": QUANTITY},
    },
    ["requests", "limits"],
)
IMAGE: Schema = obj(
    {
        "repository": NONEMPTY,
        "tag": STR,
        "pullPolicy": {"type": "string", "enum": ["Always", "IfNotPresent", "Never"]},
    },
    ["repository", "tag"],
)
TOLERATIONS: Schema = {"type": "array", "items": {"type": "object"}}


def autoscaling(extra: Schema | None = None) -> Schema:
    props: Schema = {
        "enabled": BOOL,
        "minReplicas": {"type": "integer", "minimum": 0},
        "maxReplicas": {"type": "integer", "minimum": 1},
        "targetCPUUtilizationPercentage": {"type": "integer", "minimum": 1, "maximum": 100},
    }
    props.update(extra or {})
    return obj(props, ["enabled", "minReplicas", "maxReplicas", "targetCPUUtilizationPercentage"])


def component(extra: Schema | None = None, *, scaling: Schema | None = None, workload: bool = True) -> Schema:
    """The sub-keys every component has, plus its own."""
    props: Schema = {
        "enabled": BOOL,
        "image": IMAGE,
        "replicas": {"type": "integer", "minimum": 0},
        "resources": RESOURCES,
        "env": ENV_MAP,
        "nodeSelector": STRING_MAP,
        "tolerations": TOLERATIONS,
        "affinity": {"type": "object"},
        "podAnnotations": STRING_MAP,
    }
    required = ["enabled", "image", "replicas", "resources", "env", "nodeSelector", "tolerations"]
    if workload:
        props["autoscaling"] = scaling or autoscaling()
        props["pdb"] = obj(
            {"enabled": BOOL, "maxUnavailable": {"type": ["integer", "string"]}}, ["enabled", "maxUnavailable"]
        )
        required += ["autoscaling", "pdb"]
    props.update(extra or {})
    return obj(props, required)


EXTERNAL_METRIC: Schema = obj({"enabled": BOOL, "name": NONEMPTY, "averageValue": QUANTITY}, ["enabled", "name"])


def build() -> Schema:
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "ttc Helm chart values",
        "type": "object",
        "additionalProperties": False,
        "required": ["global", "gateway", "orchestrator", "verifier", "sandbox", "policy", "redis"],
        "properties": {
            "global": obj(
                {
                    "imageTag": STR,
                    "imagePullSecrets": {"type": "array", "items": {"type": "object"}},
                    "logLevel": {"type": "string", "enum": ["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]},
                    "logJson": BOOL,
                    "otelEndpoint": STR,
                    "runAsUser": {"type": "integer", "minimum": 1},
                },
                ["logLevel", "logJson", "runAsUser"],
            ),
            "gateway": component(
                {
                    "service": obj(
                        {
                            "type": {"type": "string", "enum": ["ClusterIP", "NodePort", "LoadBalancer"]},
                            "port": PORT_INT,
                        },
                        ["type", "port"],
                    ),
                    "apiKeys": obj(
                        {
                            "existingSecret": STR,
                            "secretKey": NONEMPTY,
                            "keys": {"type": "array", "items": NONEMPTY},
                        },
                        ["existingSecret", "secretKey", "keys"],
                    ),
                }
            ),
            "orchestrator": component(
                {"concurrency": {"type": "integer", "minimum": 1}, "queueName": NONEMPTY},
                scaling=autoscaling(
                    {
                        "queueLengthPerReplica": {"type": "integer", "minimum": 1},
                        "externalMetric": EXTERNAL_METRIC,
                    }
                ),
            ),
            "verifier": component(),
            "sandbox": component(
                {
                    "runAsUser": {"type": "integer", "minimum": 1},
                    "runtimeClassName": STR,
                    "seccompProfile": obj(
                        {
                            "type": {"type": "string", "enum": ["RuntimeDefault", "Unconfined", "Localhost"]},
                            "localhostProfile": STR,
                        },
                        ["type"],
                    ),
                    "appArmorProfile": obj(
                        {
                            "type": {"type": "string", "enum": ["RuntimeDefault", "Unconfined", "Localhost"]},
                            "localhostProfile": STR,
                        }
                    ),
                    # procMount: Unmasked with hostUsers true is refused by the template, not
                    # here: the message there names both values and why.
                    "procMount": {"type": "string", "enum": ["Default", "Unmasked"]},
                    "hostUsers": BOOL,
                    "networkPolicy": obj({"enabled": BOOL}, ["enabled"]),
                }
            ),
            "policy": component(
                {
                    "engine": {"type": "string", "enum": list(ENGINE_MODULES)},
                    "model": NONEMPTY,
                    "gpus": {"type": "integer", "minimum": 0},
                    "vllm": obj(
                        {
                            "tensorParallelSize": {"type": "integer", "minimum": 1},
                            "gpuMemoryUtilization": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
                            "maxModelLen": {"type": "integer", "minimum": 64},
                        },
                        ["tensorParallelSize", "gpuMemoryUtilization", "maxModelLen"],
                    ),
                    "openai": obj({"baseUrl": STR, "apiKeySecret": STR, "model": STR}),
                    "modelVolume": obj(
                        {
                            "enabled": BOOL,
                            "existingClaim": STR,
                            "size": QUANTITY,
                            "storageClassName": STR,
                            "accessMode": {
                                "type": "string",
                                "enum": ["ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"],
                            },
                            "mountPath": {"type": "string", "pattern": "^/"},
                        },
                        ["enabled", "mountPath"],
                    ),
                    "startupSeconds": {"type": "integer", "minimum": 10},
                    "extraModels": {
                        "type": "array",
                        "items": obj(
                            {
                                "name": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]{0,18}[a-z0-9])?$"},
                                "model": NONEMPTY,
                                "engine": {"type": "string", "enum": list(ENGINE_MODULES)},
                                "replicas": {"type": "integer", "minimum": 0},
                                # merged over policy.resources: either part may be left out
                                "resources": obj(dict(RESOURCES["properties"])),
                                "env": ENV_MAP,
                            },
                            ["name", "model"],
                        ),
                    },
                },
                scaling=autoscaling(
                    {
                        "query": STR,
                        "threshold": {"type": "string", "pattern": "^[0-9.]+$"},
                        "kvQuery": STR,
                        "kvThreshold": {"type": "string", "pattern": "^[0-9.]+$"},
                        "externalMetric": EXTERNAL_METRIC,
                    }
                ),
            ),
            "redis": component(
                {
                    "externalUrl": STR,
                    "persistence": obj(
                        {"enabled": BOOL, "size": QUANTITY, "storageClassName": STR}, ["enabled", "size"]
                    ),
                },
                workload=False,
            ),
            "keda": obj(
                {
                    "enabled": BOOL,
                    "pollingInterval": {"type": "integer", "minimum": 1},
                    "cooldownPeriod": {"type": "integer", "minimum": 0},
                    "prometheusServerAddress": NONEMPTY,
                },
                ["enabled"],
            ),
            "monitoring": obj(
                {
                    "serviceMonitor": obj({"enabled": BOOL, "interval": NONEMPTY, "labels": STRING_MAP}, ["enabled"]),
                    "prometheusRule": obj({"enabled": BOOL, "labels": STRING_MAP}, ["enabled"]),
                },
                ["serviceMonitor", "prometheusRule"],
            ),
            "serviceAccount": obj({"name": STR, "annotations": STRING_MAP}),
        },
    }


def render() -> str:
    return json.dumps(build(), indent=2) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="fail if values.schema.json is out of date")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not SCHEMA_PATH.is_file() or SCHEMA_PATH.read_text() != text:
            print(f"{SCHEMA_PATH} is stale: run python scripts/helm_schema.py", file=sys.stderr)
            return 1
        return 0
    SCHEMA_PATH.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
