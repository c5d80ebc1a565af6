{{/* The objects' name: the release name when it contains the chart's name, else release-chart. */}}
{{- define "inno-notify.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "inno-notify.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "inno-notify.agentName" -}}
{{- printf "%s-agent" (include "inno-notify.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "inno-notify.secretName" -}}
{{- default (include "inno-notify.fullname" .) .Values.secret.name -}}
{{- end -}}

{{/* Selector labels: stable over upgrades. */}}
{{- define "inno-notify.selectorLabels" -}}
app.kubernetes.io/name: {{ include "inno-notify.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "inno-notify.labels" -}}
{{ include "inno-notify.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "inno-notify.agentSelectorLabels" -}}
app.kubernetes.io/name: {{ include "inno-notify.name" . }}-agent
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "inno-notify.agentLabels" -}}
{{ include "inno-notify.agentSelectorLabels" . }}
app.kubernetes.io/part-of: {{ include "inno-notify.name" . }}
app.kubernetes.io/component: nvml-agent
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "inno-notify.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}
{{- end -}}

{{/* The rules of a ClusterRole kept in files/rbac/<which>/clusterrole.yaml, shared with Kustomize. */}}
{{- define "inno-notify.rules" -}}
{{- $role := .root.Files.Get (printf "files/rbac/%s/clusterrole.yaml" .which) | fromYaml -}}
{{- if not $role.rules -}}
{{- fail (printf "files/rbac/%s/clusterrole.yaml has no rules" .which) -}}
{{- end -}}
{{- toYaml $role.rules -}}
{{- end -}}

{{/* Pod Security "restricted" for the service's containers (the same in the Kustomize base). */}}
{{- define "inno-notify.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* The environment shared by the migration and the service: the config file and the database. */}}
{{- define "inno-notify.env" -}}
- name: INNO_NOTIFY_CONFIG
  value: /etc/inno-notify/config.yaml
# The replica's name in the leader lease and the logs (ha.identity).
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
{{- if eq .Values.database.type "postgres" }}
- name: INNO_NOTIFY_DATABASE_URL_FILE
  value: /var/run/secrets/inno-notify/{{ .Values.database.postgres.urlKey }}
{{- else }}
- name: INNO_NOTIFY_DATABASE_URL
  value: sqlite+aiosqlite:////var/lib/inno-notify/inno-notify.db
{{- end }}
{{- end -}}

{{- define "inno-notify.volumeMounts" -}}
- name: config
  mountPath: /etc/inno-notify
  readOnly: true
- name: secrets
  mountPath: /var/run/secrets/inno-notify
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- if eq .Values.database.type "sqlite" }}
- name: data
  mountPath: /var/lib/inno-notify
{{- end }}
{{- end -}}
