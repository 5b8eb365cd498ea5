{{/*
The name of a release's objects: the release's own name when it holds the chart's ("hoodied",
"hoodied-prod"), else <release>-hoodied; at most 63 characters, as a DNS label.
*/}}
{{- define "hoodied.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/*
The labels the Deployment, the Service, the budget and the ServiceMonitor select the pods by: the kustomize
base's two, and the release's name so that two releases in one namespace stay apart.
*/}}
{{- define "hoodied.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/component: daemon
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Every object's labels. */}}
{{- define "hoodied.labels" -}}
{{ include "hoodied.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: hoodied
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{/*
hoodied.yaml, the daemon's configuration: the kustomize base's file (deploy/base/hoodied.yaml) with the
values in it. The ConfigMap holds it; the pods carry its checksum, so that a change rolls them.
*/}}
{{- define "hoodied.config" -}}
# hoodied's configuration, rendered by its Helm chart (every key, its default and meaning:
# services/hoodied/config.py). Each replica reads the same file; its name in claims, logs and metrics is its
# pod's name ($HOODIED_REPLICA, set by the Deployment), as `replica` is left unset here.
poll_interval: {{ .Values.pollInterval | quote }}
poll_jitter: 0.2
reschedule_interval: 5m
zookeeper:
  connect: {{ required "zookeeper.connect: the ZooKeeper ensemble (host:2181[,host:2181][/chroot])" .Values.zookeeper.connect | quote }}
  base_path: {{ .Values.zookeeper.basePath | quote }}
  session_timeout: {{ .Values.zookeeper.sessionTimeout | quote }}
  connection_timeout: {{ .Values.zookeeper.connectionTimeout | quote }}
  lock_base_path: {{ .Values.zookeeper.lockBasePath | quote }}
spark:
  master: {{ .Values.spark.master | quote }}
  max_concurrent_jobs: {{ .Values.spark.maxConcurrentJobs }}
  fair_pools: true
  {{- with .Values.spark.conf }}
  conf:
    {{- toYaml . | nindent 4 }}
  {{- end }}
metrics:
  host: 0.0.0.0 # the kubelet's probes and Prometheus reach the pod's IP
  port: 9464 # the container's port `metrics`
logging:
  level: INFO
  format: json
jobs:
  max_attempts: 5
  backoff: 30s
  backoff_max: 30m
  takeover_grace: 30s
  # On SIGTERM running jobs get this long; the pod's terminationGracePeriodSeconds is this + 30 s.
  shutdown_grace: 2m
  lock_timeout: 60s
{{- with .Values.defaults }}
defaults:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tables }}
tables:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.discover }}
discover:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if .Values.admin.existingSecret }}
admin:
  token_file: /etc/hoodied/admin/token
{{- end }}
{{- end -}}
