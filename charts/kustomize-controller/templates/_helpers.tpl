{{- define "kc.name" -}}kustomize-controller{{- end -}}

{{- define "kc.labels" -}}
app.kubernetes.io/name: {{ include "kc.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "kc.selector" -}}
app: {{ include "kc.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kc.serviceAccount" -}}{{ .Values.serviceAccount.name }}{{- end -}}
