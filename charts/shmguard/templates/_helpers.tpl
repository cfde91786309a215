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

{{/* The MutatingWebhookConfiguration is cluster-scoped: its name carries the release and its
namespace, so releases in two namespaces do not claim the same object. */}}
{{- define "shmguard.webhookName" -}}
{{- printf "%s-%s" (include "shmguard.fullname" .) .Release.Namespace -}}
{{- end -}}

{{/* Bytes in a Kubernetes quantity (the schema's forms: 1e9, 1.5G, 512Mi), as a float, for the
checks below. Takes (list FIELD VALUE); FIELD names the value in the error. */}}
{{- define "shmguard.bytes" -}}
{{- $field := index . 0 -}}
{{- $q := toString (index . 1) -}}
{{- $num := regexFind "^[+]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][-+]?[0-9]+)?" $q -}}
{{- $suffix := trimPrefix $num $q -}}
{{- $mult := dict "" 1 "k" 1e3 "M" 1e6 "G" 1e9 "T" 1e12 "P" 1e15 "E" 1e18 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 "Pi" 1125899906842624 "Ei" 1152921504606846976 -}}
{{- if or (not $num) (not (hasKey $mult $suffix)) -}}
{{- fail (printf "%s: %q is not a quantity" $field $q) -}}
{{- end -}}
{{- mulf (float64 $num) (get $mult $suffix) -}}
{{- end -}}

{{/* The shmguard config file, rendered from .Values.config. Rules that span fields fail here, at
`helm install`, rather than in pods that would refuse the config and crash-loop while the
webhook (failurePolicy Ignore) lets every pod through unsized. */}}
{{- define "shmguard.config" -}}
{{- $cfg := deepCopy .Values.config -}}
{{- $s := $cfg.sizing | default dict -}}
{{- if hasKey $s "headroom" -}}
{{- /* --set turns 1.2 into the string "1.2": accept both, write a number. */ -}}
{{- if not (regexMatch "^[0-9]+(\\.[0-9]+)?$" (toString $s.headroom)) -}}
{{- fail (printf "config.sizing.headroom: %q is not a number" (toString $s.headroom)) -}}
{{- end -}}
{{- $_ := set $s "headroom" (float64 $s.headroom) -}}
{{- end -}}
{{- $min := include "shmguard.bytes" (list "config.sizing.min" ($s.min | default "1Gi")) | float64 -}}
{{- $max := include "shmguard.bytes" (list "config.sizing.max" ($s.max | default "64Gi")) | float64 -}}
{{- $def := include "shmguard.bytes" (list "config.sizing.default" ($s.default | default "8Gi")) | float64 -}}
{{- if gt $min $max -}}
{{- fail (printf "config.sizing.min (%v) is above config.sizing.max (%v)" ($s.min | default "1Gi") ($s.max | default "64Gi")) -}}
{{- end -}}
{{- if or (lt $def $min) (gt $def $max) -}}
{{- fail (printf "config.sizing.default (%v) must lie between config.sizing.min (%v) and config.sizing.max (%v)" ($s.default | default "8Gi") ($s.min | default "1Gi") ($s.max | default "64Gi")) -}}
{{- end -}}
{{ toYaml (merge (dict "mode" .Values.mode) $cfg) }}
{{- end -}}

{{/* Whole seconds in a duration written as Helm writes one ("2m", "90s", "1h30m"). */}}
{{- define "shmguard.seconds" -}}
{{- $d := toString . -}}
{{- if or (eq $d "") (not (regexMatch "^([0-9]+h)?([0-9]+m)?([0-9]+s)?$" $d)) -}}
{{- fail (printf "installCheck.timeout must be a duration such as 2m or 90s, not %q" $d) -}}
{{- end -}}
{{- $h := regexFind "[0-9]+h" $d | trimSuffix "h" | default "0" | int -}}
{{- $m := regexFind "[0-9]+m" $d | trimSuffix "m" | default "0" | int -}}
{{- $s := regexFind "[0-9]+s" $d | trimSuffix "s" | default "0" | int -}}
{{- add (mul $h 3600) (mul $m 60) $s -}}
{{- end -}}

{{/* The monitor's pods: a name of their own, so the webhook's Service never selects them. */}}
{{- define "shmguard.monitorName" -}}
{{- printf "%s-monitor" (include "shmguard.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "shmguard.monitorSelectorLabels" -}}
app.kubernetes.io/name: {{ include "shmguard.name" . }}-monitor
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The monitor's alerts (PrometheusRule; `promtool test rules` reads the same text). */}}
{{- define "shmguard.alertRules" -}}
- alert: ShmguardShmNearlyFull
  expr: shmguard_shm_used_bytes / shmguard_shm_size_bytes >= 0.9
  for: {{ .Values.monitor.prometheusRule.nearlyFullFor }}
  labels:
    severity: warning
  annotations:
    summary: "/dev/shm of {{ "{{" }} $labels.namespace {{ "}}" }}/{{ "{{" }} $labels.pod {{ "}}" }} is {{ "{{" }} $value | humanizePercentage {{ "}}" }} full"
    description: "A DataLoader that needs more shared memory dies with a bus error. Raise shmguard.io/size (or its batch-size/num-workers/sample-size) on {{ "{{" }} $labels.owner_kind {{ "}}" }}/{{ "{{" }} $labels.owner_name {{ "}}" }}; `shmguard top` suggests a size."
- alert: ShmguardShmOversized
  expr: shmguard_shm_peak_bytes / shmguard_shm_size_bytes < 0.125
  for: {{ .Values.monitor.prometheusRule.oversizedFor }}
  labels:
    severity: info
  annotations:
    summary: "/dev/shm of {{ "{{" }} $labels.namespace {{ "}}" }}/{{ "{{" }} $labels.pod {{ "}}" }} never used 1/8 of its size"
    description: "Its peak so far is under 1/8 of the size; a smaller shmguard.io/size frees memory the pod's limit counts. `shmguard top` suggests one."
- alert: ShmguardPodsUnprotected
  expr: sum by (namespace, reason) (shmguard_unprotected_pods) > 0
  for: {{ .Values.monitor.prometheusRule.unprotectedFor }}
  labels:
    severity: warning
  annotations:
    summary: "{{ "{{" }} $value {{ "}}" }} training pods in {{ "{{" }} $labels.namespace {{ "}}" }} run without the /dev/shm shmguard would give them ({{ "{{" }} $labels.reason {{ "}}" }})"
    description: "They have the container runtime's 64 MiB /dev/shm (or their own, too small), and a DataLoader in them can die of a bus error. before-install and failed-open: recreate them; namespace-not-selected, object-not-selected: the webhook's selectors leave them out; too-small: their own sizeLimit is below their hints. Each pod has a ShmUnprotected Event, and `shmguard top` lists them with the reason."
{{- end -}}

{{/* The name of the webhook in the MutatingWebhookConfiguration: the API server's admission metrics
carry it as their `name` label, which the webhook alerts select. */}}
{{- define "shmguard.webhookEntryName" -}}
pods.shmguard.io
{{- end -}}

{{/* A counter of the API server's that rose in the last 10m. The API server creates such a series
at its first count, so a series that was not there 10m ago counts too: increase() alone needs two
samples and would never see the first fail-open after an API server start. */}}
{{- define "shmguard.counterRose" -}}
{{- $s := printf "%s{name=%q}" .metric .name -}}
sum by ({{ .by }}) (increase({{ $s }}[10m])) > 0 or sum by ({{ .by }}) ({{ $s }} unless {{ $s }} offset 10m)
{{- end -}}

{{/* Alerts on what the API server says of its calls to the webhook (its /metrics, scraped as
Prometheus's kubernetes-apiservers job or kube-prometheus-stack's apiserver ServiceMonitor do). */}}
{{- define "shmguard.webhookAlertRules" -}}
{{- $name := include "shmguard.webhookEntryName" . -}}
- alert: ShmguardWebhookFailedOpen
  expr: {{ include "shmguard.counterRose" (dict "metric" "apiserver_admission_webhook_fail_open_count" "name" $name "by" "name") }}
  labels:
    severity: warning
  annotations:
    summary: "The API server admitted pods without calling {{ $name }} (failurePolicy Ignore) in the last 10m"
    description: "Those pods have the container runtime's 64 MiB /dev/shm, and a DataLoader in one of them can die of a bus error. See why the API server could not call the webhook: its pods and Service endpoints (kubectl -n {{ .Release.Namespace }} get pods,endpoints), its serving certificate, a NetworkPolicy. `shmguard top` shows how full each pod's /dev/shm is."
- alert: ShmguardWebhookRejecting
  expr: {{ include "shmguard.counterRose" (dict "metric" "apiserver_admission_webhook_rejection_count" "name" $name "by" "name, error_type") }}
  labels:
    severity: warning
  annotations:
    summary: "The API server refused pods at {{ $name }} in the last 10m ({{ "{{" }} $labels.error_type {{ "}}" }})"
    description: "calling_webhook_error: the API server could not reach the webhook or had no answer within timeoutSeconds, and failurePolicy Fail refused the pod; apiserver_internal_error: the webhook's answer was not one the API server could apply; no_error: the webhook denied the request."
- alert: ShmguardWebhookSlow
  expr: histogram_quantile(0.99, sum by (name, le) (rate(apiserver_admission_webhook_admission_duration_seconds_bucket{name="{{ $name }}"}[5m]))) > {{ .Values.monitor.prometheusRule.webhookSlowSeconds }}
  for: 10m
  labels:
    severity: warning
  annotations:
    summary: "99% of the API server's calls to {{ $name }} take up to {{ "{{" }} $value | humanizeDuration {{ "}}" }}"
    description: "shmguard answers in microseconds; a slow call is the network or TLS between the API server and the webhook, and every pod creation waits for it (up to timeoutSeconds, {{ .Values.webhook.timeoutSeconds }}s)."
{{- end -}}

{{/* "true" when the webhook reads JobSets for their pods' hints (config.ownerLookup.enabled, on unless
set false): its token is mounted and rbac.yaml grants get on jobsets. */}}
{{- define "shmguard.ownerLookup" -}}
{{- $ol := .Values.config.ownerLookup | default dict -}}
{{- if hasKey $ol "enabled" -}}{{ $ol.enabled }}{{- else -}}true{{- end -}}
{{- end -}}
