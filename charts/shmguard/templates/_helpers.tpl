{{/* Names, labels and shared fragments of the shmguard chart. */}}

{{- define "shmguard.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "shmguard.fullname" -}}
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

{{- define "shmguard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "shmguard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "shmguard.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "shmguard.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The Secret the webhook serves its certificate from. */}}
{{- define "shmguard.certSecret" -}}
{{- if eq .Values.certificates.mode "existingSecret" -}}
{{- required "certificates.existingSecret.name is required in existingSecret mode" .Values.certificates.existingSecret.name -}}
{{- else -}}
{{- printf "%s-tls" (include "shmguard.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* DNS names the serving certificate must carry, comma-separated (use splitList ","). */}}
{{- define "shmguard.dnsNames" -}}
{{- $svc := include "shmguard.fullname" . -}}
{{- $ns := .Release.Namespace -}}
{{- printf "%s,%s.%s,%s.%s.svc,%s.%s.svc.cluster.local" $svc $svc $ns $svc $ns $svc $ns -}}
{{- end -}}

{{/* The shmguard config file, rendered from .Values.config. */}}
{{- define "shmguard.config" -}}
{{ toYaml (merge (dict "mode" .Values.mode) .Values.config) }}
{{- end -}}
