"""deploy/: the compose file validates (Debian's docker-compose v1, no engine needed), the Kubernetes manifests
validate against the Kubernetes schemas, and the pieces point at each other (mounts, config, secrets, scaling)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from pydantic import ValidationError
from vigil.schemas import load_config

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
K8S_VERSION = "1.30.0"
SECRETS = {"REDIS_PASSWORD": "r-pass-1", "CLICKHOUSE_PASSWORD": "c-pass-2", "GRAFANA_ADMIN_PASSWORD": "g-pass-3",
           "GRAFANA_CLICKHOUSE_PASSWORD": "g-pass-4", "VIGIL_JUDGE_BASE_URL": "https://judge.example/v1",
           "VIGIL_INTAKE_TOKEN": "i-token-5"}


def _compose() -> dict:
    return yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())


def _manifests() -> list[tuple[str, dict]]:
    return [(f"{path.name}:{doc['kind']}", doc) for path in sorted((DEPLOY / "k8s").glob("*.yaml"))
            if path.name != "kustomization.yaml" for doc in yaml.safe_load_all(path.read_text()) if doc]


def _by_kind(kind: str, name: str) -> dict:
    return next(doc for _, doc in _manifests() if doc["kind"] == kind and doc["metadata"]["name"] == name)


def _compose_config(env: dict[str, str]) -> subprocess.CompletedProcess:
    assert shutil.which("docker-compose"), "docker-compose is missing: `make system-deps` installs it (apt-get)"
    clean = {k: v for k, v in os.environ.items() if k not in SECRETS and not k.startswith("VIGIL_")}
    return subprocess.run(["docker-compose", "-f", str(DEPLOY / "docker-compose.yml"), "config"],
                          capture_output=True, text=True, timeout=120, env={**clean, **env}, cwd=DEPLOY)


def test_docker_compose_config_validates_with_the_required_secrets_set():
    result = _compose_config(SECRETS)

    assert result.returncode == 0, result.stderr
    resolved = yaml.safe_load(result.stdout)["services"]
    assert resolved["worker"]["environment"]["REDIS_URL"] == "redis://:r-pass-1@redis:6379/0"
    assert resolved["worker"]["environment"]["VIGIL_JUDGE_BASE_URL"] == "https://judge.example/v1"


@pytest.mark.parametrize("missing", sorted(SECRETS))
def test_compose_refuses_to_start_without_each_required_secret_naming_it(missing):
    result = _compose_config({k: v for k, v in SECRETS.items() if k != missing})

    assert result.returncode != 0
    assert f"set {missing}" in result.stderr


def test_no_password_has_a_default_in_compose():
    text = (DEPLOY / "docker-compose.yml").read_text()

    assert re.findall(r"\$\{[A-Z_]*PASSWORD:-", text) == []
    assert "admin}" not in text and ":-vigil" not in text


def test_stores_are_on_an_internal_network_and_published_ports_bind_to_localhost_only():
    compose = _compose()
    services = compose["services"]

    assert compose["networks"]["backend"]["internal"] is True
    for name in ("redis", "clickhouse", "otel-collector"):
        assert "egress" not in services[name]["networks"], f"{name} can reach out of the host"
    assert "ports" not in services["clickhouse"]
    published = [(name, port) for name, service in services.items() for port in service.get("ports", [])]
    assert published and all(port.startswith("127.0.0.1:") for _, port in published), published


def test_compose_runs_redis_clickhouse_grafana_the_collector_and_vigil_worker_migrate_and_beat():
    services = _compose()["services"]

    assert set(services) == {"redis", "clickhouse", "migrate", "worker", "beat", "intake", "otel-collector", "grafana",
                             "clickhouse-grafana-user"}
    assert services["worker"]["command"][0] == "worker"
    assert services["beat"]["command"] == ["beat"]
    assert services["migrate"]["command"] == ["migrate"]
    assert services["worker"]["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}
    assert "grafana-clickhouse-datasource" in services["grafana"]["environment"]["GF_INSTALL_PLUGINS"]


def test_every_file_compose_mounts_exists_and_grafana_gets_the_provisioning_and_the_dashboards():
    services = _compose()["services"]
    mounts = {}
    for name, service in services.items():
        for volume in service.get("volumes", []):
            source, target = volume.split(":")[:2]
            if source.startswith("."):
                assert (DEPLOY / source).exists(), f"{name} mounts missing {source}"
                mounts[target] = source

    assert mounts["/etc/grafana/provisioning"] == "./grafana/provisioning"
    assert mounts["/var/lib/grafana/dashboards/vigil"] == "./grafana/dashboards"
    assert mounts["/etc/otelcol/config.yaml"] == "./otel/collector.yaml"
    assert mounts["/etc/vigil/vigil.yaml"] == "./config/vigil.yaml"


def test_the_collector_pipelines_use_only_defined_receivers_processors_and_exporters():
    config = yaml.safe_load((DEPLOY / "otel" / "collector.yaml").read_text())

    for pipeline in config["service"]["pipelines"].values():
        for part in ("receivers", "processors", "exporters"):
            assert set(pipeline[part]) <= set(config[part])


def test_the_collector_forwards_agents_spans_to_vigil_intake_but_not_vigils_own():
    config = yaml.safe_load((DEPLOY / "otel" / "collector.yaml").read_text())
    services = _compose()["services"]

    exporter = config["exporters"]["otlphttp/vigil"]
    host, port = re.match(r"http://([\w-]+):(\d+)$", exporter["endpoint"]).groups()
    assert host in services and services[host]["command"][:1] == ["intake"]
    assert services[host]["command"][services[host]["command"].index("--port") + 1] == port
    pipelines = {name: p for name, p in config["service"]["pipelines"].items() if "otlphttp/vigil" in p["exporters"]}
    assert set(pipelines) == {"traces/vigil", "logs/vigil"}
    for name, pipeline in pipelines.items():
        assert "otlp" in pipeline["receivers"]
        [own] = [processor for processor in pipeline["processors"] if processor.startswith("filter")]
        signal = config["processors"][own][name.split("/")[0]]
        assert 'instrumentation_scope.name == "vigil"' in signal["span" if name.startswith("traces") else "log_record"]
    assert exporter["headers"]["Authorization"] == "Bearer ${env:VIGIL_INTAKE_TOKEN}"
    assert "VIGIL_INTAKE_TOKEN" in services["otel-collector"]["environment"]


def test_the_intake_service_reaches_its_pods_and_needs_only_redis():
    deployment, service = _by_kind("Deployment", "vigil-intake"), _by_kind("Service", "vigil-intake")
    [container] = deployment["spec"]["template"]["spec"]["containers"]

    assert container["args"][0] == "intake"
    assert service["spec"]["selector"] == deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["ports"][0]["targetPort"] in {p["name"] for p in container["ports"]}
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
    assert {e["name"] for e in container["env"]} == {"REDIS_URL", "VIGIL_INTAKE_TOKEN"}


@pytest.mark.parametrize("name_and_doc", _manifests(), ids=lambda item: item[0])
def test_each_kubernetes_manifest_validates_strictly(name_and_doc):
    kubernetes_validate.validate(name_and_doc[1], K8S_VERSION, strict=True)


def test_the_kustomization_lists_every_manifest():
    kustomization = yaml.safe_load((DEPLOY / "k8s" / "kustomization.yaml").read_text())
    files = {p.name for p in (DEPLOY / "k8s").glob("*.yaml")} - {"kustomization.yaml"}

    assert set(kustomization["resources"]) == files


def test_the_worker_scales_on_queue_length_and_beat_runs_exactly_one():
    hpa = _by_kind("HorizontalPodAutoscaler", "vigil-worker")
    beat = _by_kind("Deployment", "vigil-beat")

    assert hpa["spec"]["scaleTargetRef"]["name"] == "vigil-worker"
    assert {m["external"]["metric"]["selector"]["matchLabels"]["key"] for m in hpa["spec"]["metrics"]} == {
        "vigil.ingest", "vigil.score"}
    assert beat["spec"]["replicas"] == 1 and beat["spec"]["strategy"]["type"] == "Recreate"


def test_secrets_are_referenced_never_written_into_the_manifests():
    assert "Secret" not in {doc["kind"] for _, doc in _manifests()}
    worker = _by_kind("Deployment", "vigil-worker")["spec"]["template"]["spec"]
    beat = _by_kind("Deployment", "vigil-beat")["spec"]["template"]["spec"]
    for container in (worker["containers"][0], worker["initContainers"][0], beat["containers"][0]):
        env = {e["name"]: e for e in container["env"]}
        assert env["CLICKHOUSE_DSN"]["valueFrom"]["secretKeyRef"]["name"] == "vigil-secrets"


def test_every_worker_pod_migrates_the_schema_before_its_worker_starts():
    spec = _by_kind("Deployment", "vigil-worker")["spec"]["template"]["spec"]

    [init] = spec["initContainers"]
    assert init["args"] == ["migrate"] and init["image"] == spec["containers"][0]["image"]
    assert "Job" not in {doc["kind"] for _, doc in _manifests()}  # one mechanism, not a Job racing the pods


def test_the_worker_has_readiness_and_liveness_probes_that_ping_its_own_celery_node():
    [worker] = _by_kind("Deployment", "vigil-worker")["spec"]["template"]["spec"]["containers"]
    node = worker["args"][worker["args"].index("--name") + 1]

    for probe in ("readinessProbe", "livenessProbe"):
        command = " ".join(worker[probe]["exec"]["command"])
        assert "inspect ping" in command and node.replace("%h", "$HOSTNAME") in command
    assert _by_kind("Deployment", "vigil-beat")["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]


def test_the_judge_url_and_model_of_the_shipped_config_come_from_the_environment(tmp_path):
    environ = {"VIGIL_JUDGE_BASE_URL": "https://judge.example/v1"}

    judge = load_config(DEPLOY / "config" / "vigil.yaml", environ=environ).judge("gateway")
    other = load_config(DEPLOY / "config" / "vigil.yaml", environ={**environ, "VIGIL_JUDGE_MODEL": "qwen2.5-7b"})

    assert (judge.base_url, judge.model, judge.api_key_env) == ("https://judge.example/v1", "gpt-4o-mini",
                                                                "VIGIL_JUDGE_API_KEY")
    assert other.judge("gateway").model == "qwen2.5-7b"
    with pytest.raises(ValidationError, match=r"judges\.0\.base_url\n.*VIGIL_JUDGE_BASE_URL is not set"):
        load_config(DEPLOY / "config" / "vigil.yaml", environ={})
    judge_map = _by_kind("ConfigMap", "vigil-judge")["data"]
    worker_env = {e["name"]: e for e in
                  _by_kind("Deployment", "vigil-worker")["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert worker_env["VIGIL_JUDGE_BASE_URL"]["valueFrom"]["configMapKeyRef"] == {"name": "vigil-judge",
                                                                                  "key": "base-url"}
    assert set(judge_map) == {"base-url", "model"}


@pytest.mark.parametrize(
    ("text", "environ", "expected"),
    [
        pytest.param("${A}", {"A": "x"}, "x", id="a set variable"),
        pytest.param("${A:-dflt}", {}, "dflt", id="an unset variable with a default"),
        pytest.param("${A:-dflt}", {"A": ""}, "dflt", id="an empty variable with a default"),
        pytest.param("http://${H}:${P:-80}/v1", {"H": "h"}, "http://h:80/v1", id="inside a string"),
        pytest.param("$${A}", {"A": "x"}, "${A}", id="$$ escapes a dollar"),
        pytest.param("costs $5", {}, "costs $5", id="a lone dollar is left alone"),
    ],
)
def test_config_strings_interpolate_environment_variables(tmp_path, text, environ, expected):
    path = tmp_path / "vigil.yaml"
    path.write_text(yaml.safe_dump({"judges": [{"name": "j", "base_url": text}]}))

    assert load_config(path, environ=environ).judges[0].base_url == expected


def test_the_configmap_carries_the_same_monitor_config_as_compose_and_it_validates(tmp_path):
    configmap = _by_kind("ConfigMap", "vigil-config")
    (tmp_path / "vigil.yaml").write_text(configmap["data"]["vigil.yaml"])

    assert configmap["data"]["vigil.yaml"] == (DEPLOY / "config" / "vigil.yaml").read_text()
    config = load_config(tmp_path / "vigil.yaml", environ={"VIGIL_JUDGE_BASE_URL": "https://judge.example/v1"})
    assert {r.kind for r in config.alerts} == {"regression", "failure_rate", "coverage", "judge_paused", "agreement"}


def test_no_deploy_file_sets_an_empty_intake_token():
    """An empty VIGIL_INTAKE_TOKEN used to make the intake refuse every request, unlogged; compose now refuses to
    start without one, as for its other secrets, and the Kubernetes intake needs its secret key."""
    compose = _compose()
    for name in ("intake", "otel-collector"):
        assert compose["services"][name]["environment"]["VIGIL_INTAKE_TOKEN"].startswith("${VIGIL_INTAKE_TOKEN:?")
    [container] = _by_kind("Deployment", "vigil-intake")["spec"]["template"]["spec"]["containers"]
    [token] = [e for e in container["env"] if e["name"] == "VIGIL_INTAKE_TOKEN"]
    assert "optional" not in token["valueFrom"]["secretKeyRef"]
