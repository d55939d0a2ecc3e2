{{/*
Shared pieces of every workload. Each component template passes (dict "root" $ "name" "<component>")
so labels, images, security contexts and wiring env are written once. A further deployment of a
component (a policy per model: policy.extraModels) adds "component" (its object name and label,
e.g. "policy-qwen") and "values" (its merged values, instead of .Values.<name>).
*/}}

{{- define "ttc.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "ttc.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Name of one component's objects: <fullname>-<component>. */}}
{{- define "ttc.componentName" -}}
{{- printf "%s-%s" (include "ttc.fullname" .root) (.component | default .name) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "ttc.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ttc.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component | default .name }}
{{- end -}}

{{- define "ttc.labels" -}}
{{ include "ttc.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: ttc-serve
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "ttc.serviceAccountName" -}}
{{- default (include "ttc.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* Fixed ports of each service: the services' defaults, kept identical in compose. */}}
{{- define "ttc.grpcPort" -}}
{{- get (dict "policy" 50051 "verifier" 50052 "sandbox" 50053 "orchestrator" 50054) .name -}}
{{- end -}}

{{- define "ttc.metricsPort" -}}
{{- get (dict "policy" 9101 "verifier" 9102 "sandbox" 9103 "orchestrator" 9104 "gateway" 8000) .name -}}
{{- end -}}

{{/*
Target of a component's gRPC Service. The Services are headless so that a client resolving
dns:/// sees every pod and can spread calls (round_robin) instead of pinning one HTTP/2
connection to one pod behind a ClusterIP.
*/}}
{{- define "ttc.grpcTarget" -}}
{{- printf "dns:///%s:%s" (include "ttc.componentName" .) (include "ttc.grpcPort" .) -}}
{{- end -}}

{{- define "ttc.image" -}}
{{- $comp := .values | default (index .root.Values .name) -}}
{{- $tag := $comp.image.tag | default .root.Values.global.imageTag | default .root.Chart.AppVersion -}}
{{- printf "%s:%s" $comp.image.repository $tag -}}
{{- end -}}

{{- define "ttc.redisUrl" -}}
{{- if .Values.redis.enabled -}}
{{- printf "redis://%s:6379/0" (include "ttc.componentName" (dict "root" . "name" "redis")) -}}
{{- else -}}
{{- required "redis.externalUrl is required when redis.enabled is false" .Values.redis.externalUrl -}}
{{- end -}}
{{- end -}}

{{/*
The container's env: settings every service reads (services/common/settings.py), the
component's own port settings, the wiring passed in .env (a name -> value dict), and last the
user's env map, which wins over all of them. Rendered sorted, without duplicates.
*/}}
{{- define "ttc.env" -}}
{{- $v := .root.Values -}}
{{- $prefix := printf "TTC_%s_" (upper .name) -}}
{{- $env := dict
  "TTC_LOG_LEVEL" $v.global.logLevel
  "TTC_LOG_JSON" $v.global.logJson
  "TTC_OTEL_ENDPOINT" $v.global.otelEndpoint
  "TTC_REDIS_URL" (include "ttc.redisUrl" .root)
  (printf "%sHOST" $prefix) "0.0.0.0"
  (printf "%sPORT" $prefix) (ternary "8000" (include "ttc.grpcPort" .) (eq .name "gateway"))
-}}
{{- if ne .name "gateway" -}}
{{- $_ := set $env (printf "%sMETRICS_PORT" $prefix) (include "ttc.metricsPort" .) -}}
{{- end -}}
{{- /* A sandbox without egress cannot reach a collector; don't let it retry exports forever. */ -}}
{{- if and (eq .name "sandbox") $v.sandbox.networkPolicy.enabled -}}
{{- $_ := set $env "TTC_OTEL_ENDPOINT" "" -}}
{{- end -}}
{{- $env = merge (deepCopy ((.values | default (index $v .name)).env | default dict)) (.env | default dict) $env -}}
{{- range $key := keys $env | sortAlpha }}
- name: {{ $key }}
  value: {{ index $env $key | toString | quote }}
{{- end }}
{{- end -}}

{{- define "ttc.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .Values.global.runAsUser }}
runAsGroup: {{ .Values.global.runAsUser }}
fsGroup: {{ .Values.global.runAsUser }}
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "ttc.containerSecurityContext" -}}
runAsNonRoot: true
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
privileged: false
capabilities:
  drop: ["ALL"]
{{- end -}}

{{/* nodeSelector, tolerations, affinity and pull secrets of a component's pod spec. */}}
{{- define "ttc.scheduling" -}}
{{- $comp := .values | default (index .root.Values .name) -}}
{{- with .root.Values.global.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $comp.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $comp.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $comp.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
Pod template metadata with a checksum of the chart's config so a changed value rolls pods.
The sandbox's procMount and hostUsers are left out: the pod spec carries them itself (a change
rolls the pods anyway), and leaving them out keeps a default install's pods from rolling when
the chart that added them is upgraded to.
*/}}
{{- define "ttc.podMetadata" -}}
{{- $comp := .values | default (index .root.Values .name) -}}
{{- $summed := omit $comp "procMount" "hostUsers" -}}
metadata:
  labels:
    {{- include "ttc.labels" . | nindent 4 }}
  annotations:
    {{- with $comp.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
    checksum/values: {{ toJson $summed | sha256sum | trunc 16 | quote }}
{{- end -}}

{{/* Native gRPC probes against grpc.health.v1 (Kubernetes >= 1.27). */}}
{{- define "ttc.grpcProbes" -}}
readinessProbe:
  grpc:
    port: {{ include "ttc.grpcPort" . }}
  periodSeconds: 5
  timeoutSeconds: 2
  failureThreshold: 3
livenessProbe:
  grpc:
    port: {{ include "ttc.grpcPort" . }}
  periodSeconds: 10
  timeoutSeconds: 3
  failureThreshold: 6
startupProbe:
  grpc:
    port: {{ include "ttc.grpcPort" . }}
  periodSeconds: 5
  timeoutSeconds: 2
  failureThreshold: {{ .startupFailures | default 24 }}
{{- end -}}

{{/* Scratch space for a read-only root filesystem. */}}
{{- define "ttc.tmpVolumeMount" -}}
- name: tmp
  mountPath: /tmp
{{- end -}}

{{- define "ttc.tmpVolume" -}}
- name: tmp
  emptyDir:
    sizeLimit: {{ .sizeLimit | default "256Mi" }}
{{- end -}}


{{/*
The further policy deployments (policy.extraModels), each as (dict "ctx" <context> "values"
<merged values> "model" <model>): its values are policy's with the entry's keys on top. Rendered
as YAML; read back with fromYaml.
*/}}
{{- define "ttc.extraPolicies" -}}
{{- $out := list }}
{{- range $m := .Values.policy.extraModels }}
{{- $values := mergeOverwrite (deepCopy (omit $.Values.policy "extraModels")) (omit $m "name") }}
{{- /* autoscaling and the PDB are the default deployment's; a further one runs its replicas */}}
{{- $_ := set $values.autoscaling "enabled" false }}
{{- $out = append $out (dict "component" (printf "policy-%s" $m.name) "model" $m.model "values" $values) }}
{{- end }}
{{- toYaml (dict "items" $out) }}
{{- end -}}

{{/* TTC_*_POLICY_TARGETS: "model=target,..." of the further policy deployments. */}}
{{- define "ttc.policyTargets" -}}
{{- $pairs := list }}
{{- range $m := .Values.policy.extraModels }}
{{- $ctx := dict "root" $ "name" "policy" "component" (printf "policy-%s" $m.name) }}
{{- $pairs = append $pairs (printf "%s=%s" $m.model (include "ttc.grpcTarget" $ctx)) }}
{{- end }}
{{- join "," $pairs }}
{{- end -}}

{{/*
The sandbox's procMount and hostUsers (values.sandbox), refused when rendering rather than by the
cluster later: Kubernetes takes procMount: Unmasked only in a user-namespaced pod and rejects the
pod otherwise ("`hostUsers` must be false to use `Unmasked`"); and a user-namespaced pod maps
only uids 0-65535, so a larger sandbox.runAsUser could never start. Called with the sandbox's
values; renders nothing.
*/}}
{{- define "ttc.sandboxProcMountCheck" -}}
{{- $userns := eq (toString .hostUsers) "false" -}}
{{- if and (eq (toString .procMount) "Unmasked") (not $userns) -}}
{{- fail "sandbox.procMount: Unmasked needs sandbox.hostUsers: false: Kubernetes allows an unmasked /proc only in a pod with its own user namespace (see the comment on sandbox.procMount in values.yaml)" -}}
{{- end -}}
{{- if and $userns (ge (int .runAsUser) 65536) -}}
{{- fail (printf "sandbox.runAsUser (%d) must be below 65536 with sandbox.hostUsers: false: a pod's user namespace maps uids 0-65535 only" (int .runAsUser)) -}}
{{- end -}}
{{- end -}}
