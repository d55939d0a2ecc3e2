"""`make compose-smoke`: start docker-compose.yml's core profile for real and check it answers.

Builds what is missing (scripts/build_core_images.sh, TTC_IMAGE_SOURCE=debian by default: no
registry), starts the core profile with podman-compose under its own project name and free
host ports, waits until every container's own healthcheck passes, sends one chat completion per
reasoning effort with the official openai SDK to the gateway, and checks that Prometheus scrapes
every target it has (/api/v1/targets: all up). It prints a summary, writes it to
docs/data/compose_smoke/<UTC time>.json, and tears everything down, also on failure (with the last
log lines of every container in the summary). Exit status 0 only if every step passed.

Prometheus gets deploy/prometheus/prometheus.yml less the jobs whose targets are not core
services (the GPU policy, the collector): those are absent by design, not down.

Healthchecks run by `podman healthcheck run` from here: podman schedules them with systemd
timers, which a host without systemd (a container, CI) does not have, and podman-compose
ignores `condition: service_healthy` before podman 4.6; so the stack starts all at once and the
services' own retries and restart policies carry it until each check passes.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from services.common.ports import free_port  # noqa: E402
from services.gateway.effort import EFFORTS  # noqa: E402

COMPOSE_FILE = ROOT / "docker-compose.yml"
PROMETHEUS_CONFIG = ROOT / "deploy" / "prometheus" / "prometheus.yml"
PROJECT = "ttc-smoke"
MODEL = "smollm2-135m"
PROMPT = "What is 17 + 25? Answer with the number."
LOCAL_TARGETS = ("localhost", "127.0.0.1")


def core_services(compose: dict[str, Any]) -> list[str]:
    """The core profile: every service without a profile (what a plain `compose up` starts)."""
    return sorted(name for name, service in compose["services"].items() if not service.get("profiles"))


def scrape_config_for(prometheus: dict[str, Any], services: set[str]) -> tuple[dict[str, Any], list[str]]:
    """The scrape config less the jobs with a target outside ``services``; returns it and the dropped jobs."""
    kept, dropped = [], []
    for job in prometheus["scrape_configs"]:
        hosts = {t.split(":")[0] for sc in job.get("static_configs", []) for t in sc["targets"]}
        if hosts <= services | set(LOCAL_TARGETS):
            kept.append(job)
        else:
            dropped.append(job["job_name"])
    return {**prometheus, "scrape_configs": kept}, dropped


def sh(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, check=False, cwd=ROOT)


def containers(env: dict[str, str]) -> dict[str, str]:
    """service name -> container name, for this project's containers."""
    proc = sh(["podman", "ps", "-a", "--filter", f"label=io.podman.compose.project={PROJECT}", "--format", "json"], env)
    out: dict[str, str] = {}
    for c in json.loads(proc.stdout or "[]"):
        out[c["Labels"]["com.docker.compose.service"]] = c["Names"][0]
    return out


def wait_healthy(services: list[str], env: dict[str, str], deadline_s: float) -> dict[str, float]:
    """Run each container's healthcheck until it passes; returns seconds to healthy per service."""
    start = time.monotonic()
    healthy: dict[str, float] = {}
    while len(healthy) < len(services):
        if time.monotonic() - start > deadline_s:
            missing = sorted(set(services) - set(healthy))
            raise TimeoutError(f"not healthy after {deadline_s:.0f} s: {', '.join(missing)}")
        names = containers(env)
        for service in services:
            if service in healthy or service not in names:
                continue
            if sh(["podman", "healthcheck", "run", names[service]], env, timeout=30).returncode == 0:
                healthy[service] = round(time.monotonic() - start, 1)
                print(f"  {service} healthy after {healthy[service]} s", flush=True)
        time.sleep(3)
    return healthy


def chat_per_effort(base_url: str) -> list[dict[str, Any]]:
    client = openai.OpenAI(base_url=base_url, api_key="compose-smoke", timeout=600, max_retries=0)
    results = []
    for effort in EFFORTS:
        t0 = time.perf_counter()
        try:
            reply = client.chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": PROMPT}],
                max_tokens=48,
                temperature=0,
                reasoning_effort=effort,
            )
        except openai.OpenAIError as exc:
            results.append(
                {"effort": effort, "ok": False, "seconds": round(time.perf_counter() - t0, 2), "error": repr(exc)}
            )
            print(f"  {effort:8s} FAILED {exc!r}", flush=True)
            continue
        ttc = (reply.model_extra or {}).get("ttc", {})
        usage = reply.usage
        row = {
            "effort": effort,
            "ok": bool(reply.choices and reply.choices[0].message.content),
            "seconds": round(time.perf_counter() - t0, 2),
            "content": reply.choices[0].message.content if reply.choices else None,
            "finish_reason": reply.choices[0].finish_reason if reply.choices else None,
            "prompt_tokens": usage.prompt_tokens if usage else None,
            "completion_tokens": usage.completion_tokens if usage else None,
            "strategy": ttc.get("strategy"),
            "effort_applied": ttc.get("effort_applied"),
            "termination": ttc.get("termination"),
        }
        results.append(row)
        print(
            f"  {effort:8s} {row['seconds']:7.2f} s  {row['strategy']!s:14s} applied={row['effort_applied']} "
            f"tokens={row['completion_tokens']} content={row['content']!r}",
            flush=True,
        )
    return results


def prometheus_targets(url: str, wait_s: float) -> list[dict[str, Any]]:
    """Every active target's health, once all are up or after ``wait_s`` (first scrape is ≤ 15 s away)."""
    start = time.monotonic()
    while True:
        data = httpx.get(f"{url}/api/v1/targets", params={"state": "active"}, timeout=10).json()["data"]
        targets = [
            {
                "job": t["labels"].get("job"),
                "instance": t["labels"].get("instance"),
                "health": t["health"],
                "last_error": t.get("lastError", ""),
            }
            for t in data["activeTargets"]
        ]
        if (targets and all(t["health"] == "up" for t in targets)) or time.monotonic() - start > wait_s:
            return targets
        time.sleep(3)


def image_facts(env: dict[str, str], names: list[str]) -> list[dict[str, Any]]:
    facts = []
    for name in names:
        proc = sh(["podman", "image", "inspect", name, "--format", "{{.Id}} {{.Size}}"], env)
        image_id, _, size = proc.stdout.strip().partition(" ")
        facts.append({"image": name, "id": image_id[:12], "size_mb": round(int(size) / 1e6) if size else None})
    return facts


def preflight() -> str | None:
    """Why podman cannot run the stack here, or None: compose names need a DNS plugin on CNI."""
    backend = sh(["podman", "info", "--format", "{{.Host.NetworkBackend}}"]).stdout.strip()
    plugin_dirs = (Path("/usr/lib/cni"), Path("/usr/libexec/cni"), Path("/opt/cni/bin"))
    if backend == "cni" and not any((d / "dnsname").exists() for d in plugin_dirs):
        package = "golang-github-containernetworking-plugin-dnsname"
        return f"podman uses CNI without the dnsname plugin (no compose names): apt-get install {package}"
    return None


def git_describe() -> str:
    return sh(["git", "describe", "--always", "--dirty"]).stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--source", default=os.environ.get("TTC_IMAGE_SOURCE", "debian"), choices=["debian", "registry"]
    )
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "data" / "compose_smoke")
    parser.add_argument("--health-deadline-s", type=float, default=900)
    args = parser.parse_args()
    # A stop (SIGTERM: make interrupted, the lock holder killed) unwinds like an error, so the
    # teardown below runs and no container outlives the smoke.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    podman_compose = Path(sys.executable).parent / "podman-compose"
    if not podman_compose.exists():
        sys.exit(f"{podman_compose} missing: pip install -c requirements.lock podman-compose (the dev extra)")

    problem = preflight()
    if problem:
        sys.exit(problem)
    summary: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "git": git_describe(),
        "source": args.source,
        "loadavg_start": os.getloadavg(),
        "model": MODEL,
        "passed": False,
    }
    t_all = time.monotonic()
    # SmolLM2 (the smallest embedded model: a 98 MB GGUF against the default's 491 MB) in place of
    # compose's default model: the policy image is built with it alone, and the run stays short.
    env = {
        **os.environ,
        "TTC_IMAGE_SOURCE": args.source,
        "EMBEDDED_MODELS": os.environ.get("EMBEDDED_MODELS", MODEL),
        "TTC_POLICY_MODEL": MODEL,
    }
    print(f"building the core images (TTC_IMAGE_SOURCE={args.source}) ...", flush=True)
    t0 = time.monotonic()
    build = subprocess.run(
        [str(ROOT / "scripts" / "build_core_images.sh")],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        check=False,
    )
    summary["build_s"] = round(time.monotonic() - t0, 1)
    if build.returncode != 0:
        print(f"image build failed (exit {build.returncode})", flush=True)
        return 1
    env_file = ROOT / build.stdout.strip().splitlines()[-1]
    for line in env_file.read_text().splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            env[key] = value
    env["CONTAINERS_CONF"] = sh([str(ROOT / "scripts" / "podman_limits_conf.sh")], env).stdout.strip()

    pc = [str(podman_compose), "--in-pod", "false", "-p", PROJECT, "-f", str(COMPOSE_FILE)]
    work = ROOT / "build" / "compose-smoke"
    work.mkdir(parents=True, exist_ok=True)
    ports = {name: free_port() for name in ("GATEWAY", "REDIS", "POLICY", "PROMETHEUS")}
    env.update({f"TTC_{name}_PORT": str(port) for name, port in ports.items()})
    env.update({"TTC_OTEL_ENDPOINT": "", "TTC_PROMETHEUS_CONFIG": str(work / "prometheus.yml")})
    # The file as podman-compose resolves it with this environment: the images it will run.
    resolved = yaml.safe_load(sh([*pc, "config"], env).stdout)
    services = core_services(yaml.safe_load(COMPOSE_FILE.read_text()))
    scrape, dropped = scrape_config_for(yaml.safe_load(PROMETHEUS_CONFIG.read_text()), set(services))
    (work / "prometheus.yml").write_text(yaml.safe_dump(scrape, sort_keys=False))
    summary.update(services=services, prometheus_jobs_dropped=dropped, env_file=str(env_file.relative_to(ROOT)))
    summary["images"] = image_facts(env, [resolved["services"][s]["image"] for s in services])
    try:
        print(f"starting the core profile ({', '.join(services)}) ...", flush=True)
        t0 = time.monotonic()
        up = sh([*pc, "up", "-d", "--no-build"], env, timeout=600)
        if up.returncode != 0:
            summary["error"] = f"podman-compose up failed: {up.stderr[-2000:]}"
            return 1
        summary["healthy_after_s"] = wait_healthy(services, env, args.health_deadline_s)
        summary["up_s"] = round(time.monotonic() - t0, 1)
        gateway = f"http://127.0.0.1:{ports['GATEWAY']}"
        ready = httpx.get(f"{gateway}/readyz", timeout=10)
        summary["gateway_ready"] = ready.status_code == 200
        print("one chat completion per effort:", flush=True)
        t0 = time.monotonic()
        summary["requests"] = chat_per_effort(f"{gateway}/v1")
        summary["requests_s"] = round(time.monotonic() - t0, 1)
        summary["prometheus_targets"] = prometheus_targets(f"http://127.0.0.1:{ports['PROMETHEUS']}", wait_s=90)
        for t in summary["prometheus_targets"]:
            print(f"  target {t['job']:18s} {t['instance']:20s} {t['health']} {t['last_error']}", flush=True)
        summary["passed"] = (
            summary["gateway_ready"]
            and all(r["ok"] for r in summary["requests"])
            and bool(summary["prometheus_targets"])
            and all(t["health"] == "up" for t in summary["prometheus_targets"])
        )
        return 0 if summary["passed"] else 1
    except Exception as exc:
        summary["error"] = repr(exc)
        raise
    finally:
        if not summary["passed"]:
            summary["logs"] = {
                s: sh(["podman", "logs", "--tail", "30", name], env).stdout[-3000:]
                + sh(["podman", "logs", "--tail", "30", name], env).stderr[-3000:]
                for s, name in containers(env).items()
            }
        t0 = time.monotonic()
        down = sh([*pc, "down", "-v", "-t", "10"], env, timeout=300)
        summary["teardown_s"] = round(time.monotonic() - t0, 1)
        summary["teardown_ok"] = down.returncode == 0 and not containers(env)
        summary["total_s"] = round(time.monotonic() - t_all, 1)
        summary["loadavg_end"] = os.getloadavg()
        args.out.mkdir(parents=True, exist_ok=True)
        path = args.out / f"{dt.datetime.now(dt.UTC):%Y-%m-%dT%H%MZ}.json"  # one file per run
        path.write_text(json.dumps(summary, indent=2) + "\n")
        verdict = "PASSED" if summary["passed"] else "FAILED"
        print(
            f"compose-smoke {verdict}: build {summary['build_s']} s, up {summary.get('up_s')} s, "
            f"requests {summary.get('requests_s')} s, teardown {summary['teardown_s']} s, "
            f"total {summary['total_s']} s -> {path.relative_to(ROOT)}",
            flush=True,
        )


if __name__ == "__main__":
    sys.exit(main())
